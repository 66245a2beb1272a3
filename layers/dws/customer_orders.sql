-- Seed 000: orders per customer, joining three CDC streams.
SELECT count(o.order_id) AS order_count,
       c.cust_id,
       c.name,
       c.mktsegment
FROM   ods.customer c
       JOIN ods.customer_site cs ON c.cust_id = cs.cust_id
       JOIN ods.sales_order_all o ON o.site_id = cs.site_id
GROUP  BY c.cust_id, c.name, c.mktsegment
