-- Seed 004: devices per model, the aggregate the article builds with Flink; here incremental.
select count(1) as num, device_model from ods.user group by device_model
