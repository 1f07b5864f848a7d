-- Tables ndbgate expects in an NDB cluster (run through any mysqld of the
-- cluster). ndbgate never creates NDB tables itself.

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
