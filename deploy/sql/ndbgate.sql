-- Tables ndbgate expects in an NDB cluster (run through any mysqld of the
-- cluster). `ndbgate serve` never creates NDB tables; `ndbgate
-- ndb-create-tables` makes the same through NdbDictionary for a cluster
-- without a mysqld.

CREATE DATABASE IF NOT EXISTS ndbmemcache;

-- The default memcache container: ndbmemcache's demo_table shape.
CREATE TABLE IF NOT EXISTS ndbmemcache.demo_table (
  mkey         VARCHAR(250) NOT NULL,
  string_value VARBINARY(13500),
  flags        INT UNSIGNED,
  cas_value    BIGINT UNSIGNED,
  expire_time  INT UNSIGNED,
  math_value   BIGINT UNSIGNED,
  PRIMARY KEY (mkey) USING HASH
) ENGINE = NDBCLUSTER;
-- Optional: the meta protocol's item state (h, l, W/X/Z leases, stale
-- items) needs a column to live in. The first read of each version then
-- also writes it. Online:
--   ALTER TABLE ndbmemcache.demo_table ADD COLUMN item_state BIGINT UNSIGNED
--     NULL COLUMN_FORMAT DYNAMIC, ALGORITHM=INPLACE;

-- The driver behaviour suite's table (tests/ndb, ndbclient/drivertest).
CREATE DATABASE IF NOT EXISTS ndbgate_test;
CREATE TABLE IF NOT EXISTS ndbgate_test.suite (
  mkey         VARCHAR(250) NOT NULL,
  string_value VARBINARY(2048),
  flags        INT UNSIGNED,
  cas_value    BIGINT UNSIGNED,
  expire_time  INT UNSIGNED,
  math_value   BIGINT UNSIGNED,
  PRIMARY KEY (mkey) USING HASH
) ENGINE = NDBCLUSTER;

-- The item state suite's table (tests/ndb).
CREATE TABLE IF NOT EXISTS ndbgate_test.items (
  mkey         VARCHAR(250) NOT NULL,
  string_value VARBINARY(2048),
  flags        INT UNSIGNED,
  cas_value    BIGINT UNSIGNED,
  expire_time  INT UNSIGNED,
  math_value   BIGINT UNSIGNED,
  item_state   BIGINT UNSIGNED,
  PRIMARY KEY (mkey) USING HASH
) ENGINE = NDBCLUSTER;

-- The row API example table of deploy/examples/ndbgate.yaml.
CREATE DATABASE IF NOT EXISTS shop;
CREATE TABLE IF NOT EXISTS shop.orders (
  id BIGINT UNSIGNED NOT NULL,
  customer VARCHAR(64) NOT NULL,
  total DECIMAL(12,2) NOT NULL,
  placed_at DATETIME(3) NOT NULL,
  note VARCHAR(255) NULL,
  payload VARBINARY(1024) NULL,
  PRIMARY KEY (id)
) ENGINE=NDBCLUSTER CHARSET=utf8mb4;
