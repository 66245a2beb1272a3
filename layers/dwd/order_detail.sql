-- Order lines with their user and product (seed 004 tables).
SELECT o.id AS order_id,
       o.oid,
       o.uid,
       u.name AS user_name,
       u.device_model,
       o.pid,
       p.pname,
       p.pprice,
       o.onum,
       o.onum * p.pprice AS amount,
       o.create_time
FROM   ods.user_order o
       JOIN ods.user u ON o.uid = u.id
       JOIN ods.product p ON o.pid = p.pid
