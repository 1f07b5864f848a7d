-- A server role for the differential test with what the demo roles of
-- ndb_memcache_metadata.sql leave out: the ndb-read-only and
-- caching-with-local-deletes policies, a container with a two-column
-- key, two value columns and constant flags, and one with large values and
-- an expire column (bx:). Load it through mysqld after
-- ndb_memcache_metadata.sql:
--   mysql -uroot < tests/ndbmemcache/policies.sql
CREATE TABLE IF NOT EXISTS ndbmemcache.pairs (
  region VARCHAR(20) NOT NULL,
  id INT NOT NULL,
  name VARCHAR(40),
  city VARCHAR(40),
  PRIMARY KEY (region, id)
) ENGINE = NDBCLUSTER;
CREATE TABLE IF NOT EXISTS ndbmemcache.demo_table_large_exp (
  mkey VARCHAR(250) NOT NULL,
  flags INT UNSIGNED,
  cas_value BIGINT UNSIGNED,
  expire_time INT UNSIGNED,
  string_value VARBINARY(2000),
  ext_id INT UNSIGNED,
  ext_size INT UNSIGNED,
  PRIMARY KEY USING HASH (mkey)
) ENGINE = NDBCLUSTER;
INSERT INTO ndbmemcache.memcache_server_roles (role_name, role_id) VALUES ('ndbgate-diff', 10)
  ON DUPLICATE KEY UPDATE role_id = 10;
REPLACE INTO ndbmemcache.containers SET name = 'pairs', db_schema = 'ndbmemcache', db_table = 'pairs',
  key_columns = 'region,id', value_columns = 'name,city', flags = '17';
REPLACE INTO ndbmemcache.containers SET name = 'demo_ext_exp', db_schema = 'ndbmemcache', db_table = 'demo_table_large_exp',
  key_columns = 'mkey', value_columns = 'string_value', cas_column = 'cas_value', flags = 'flags',
  expire_time_column = 'expire_time', large_values_table = 'ndbmemcache.external_values';
REPLACE INTO ndbmemcache.key_prefixes (server_role_id, key_prefix, cluster_id, policy, container) VALUES
  (10, '', 0, 'ndb-test', 'demo_table'),
  (10, 'ro:', 0, 'ndb-read-only', 'demo_table'),
  (10, 'cld:', 0, 'caching-with-local-deletes', 'demo_table'),
  (10, 'p:', 0, 'ndb-test', 'pairs'),
  (10, 'bx:', 0, 'ndb-test', 'demo_ext_exp'),
  (10, 'mc:', 0, 'memcache-only', NULL);
