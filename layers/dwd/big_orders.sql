-- Row-wise: orders of at least 5 units.
SELECT id, oid, uid, pid, onum, create_time FROM ods.user_order WHERE onum >= 5
