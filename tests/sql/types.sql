-- Tables made through mysqld, as users make theirs, for tests/sqloracle:
-- SQL is the oracle ndbgate's REST, gRPC and memcache front ends are
-- compared with. One table per family of types, each far under NDB's row
-- size limit (about 14,000 bytes; utf8mb4 takes 4 bytes a character).
-- Every column but the keys is nullable, so NULL is tried in every type.
--
-- The test loads this file through database/sql; by hand:
--   mysql -uroot -S /tmp/mysql.sock < tests/sql/types.sql
-- It drops and creates database ndbgate_sqltypes and nothing else.

DROP DATABASE IF EXISTS ndbgate_sqltypes;
CREATE DATABASE ndbgate_sqltypes DEFAULT CHARACTER SET utf8mb4;
USE ndbgate_sqltypes;

-- Every integer width, signed and unsigned.
CREATE TABLE ints (
  id  INT UNSIGNED NOT NULL PRIMARY KEY,
  i8  TINYINT NULL,
  u8  TINYINT UNSIGNED NULL,
  i16 SMALLINT NULL,
  u16 SMALLINT UNSIGNED NULL,
  i24 MEDIUMINT NULL,
  u24 MEDIUMINT UNSIGNED NULL,
  i32 INT NULL,
  u32 INT UNSIGNED NULL,
  i64 BIGINT NULL,
  u64 BIGINT UNSIGNED NULL
) ENGINE=NDBCLUSTER;

-- Floating point and DECIMAL at several precisions: up to 15 digits a
-- DECIMAL is a JSON number, above it a string (gateway/rowapi/codec.go).
CREATE TABLE nums (
  id     INT UNSIGNED NOT NULL PRIMARY KEY,
  f      FLOAT NULL,
  d      DOUBLE NULL,
  d5_2   DECIMAL(5,2) NULL,
  d10_0  DECIMAL(10,0) NULL,
  d10_2  DECIMAL(10,2) NULL,
  d15_5  DECIMAL(15,5) NULL,
  d16_4  DECIMAL(16,4) NULL,
  d30_10 DECIMAL(30,10) NULL,
  d65_30 DECIMAL(65,30) NULL,
  du9_3  DECIMAL(9,3) UNSIGNED NULL
) ENGINE=NDBCLUSTER;

-- Temporal types, each fractional precision of TIME, DATETIME and TIMESTAMP.
-- TIMESTAMP columns say NULL DEFAULT NULL, or MySQL 5.7 gives the first one
-- DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP.
CREATE TABLE temporal (
  id  INT UNSIGNED NOT NULL PRIMARY KEY,
  dt  DATE NULL,
  yr  YEAR NULL,
  t0  TIME(0) NULL, t1 TIME(1) NULL, t2 TIME(2) NULL, t3 TIME(3) NULL,
  t4  TIME(4) NULL, t5 TIME(5) NULL, t6 TIME(6) NULL,
  dt0 DATETIME(0) NULL, dt1 DATETIME(1) NULL, dt2 DATETIME(2) NULL, dt3 DATETIME(3) NULL,
  dt4 DATETIME(4) NULL, dt5 DATETIME(5) NULL, dt6 DATETIME(6) NULL,
  ts0 TIMESTAMP(0) NULL DEFAULT NULL, ts1 TIMESTAMP(1) NULL DEFAULT NULL,
  ts2 TIMESTAMP(2) NULL DEFAULT NULL, ts3 TIMESTAMP(3) NULL DEFAULT NULL,
  ts4 TIMESTAMP(4) NULL DEFAULT NULL, ts5 TIMESTAMP(5) NULL DEFAULT NULL,
  ts6 TIMESTAMP(6) NULL DEFAULT NULL
) ENGINE=NDBCLUSTER;

-- Character strings in utf8mb4 (general and binary collation) and the
-- binary character set (MySQL makes those BINARY and VARBINARY), and the
-- binary types spelled as such.
CREATE TABLE strs (
  id   INT UNSIGNED NOT NULL PRIMARY KEY,
  c_u  CHAR(10) CHARACTER SET utf8mb4 NULL,
  v_u  VARCHAR(40) CHARACTER SET utf8mb4 NULL,
  c_ub CHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  v_ub VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  c_bc CHAR(10) CHARACTER SET binary NULL,
  v_bc VARCHAR(40) CHARACTER SET binary NULL,
  bin  BINARY(8) NULL,
  vbin VARBINARY(300) NULL
) ENGINE=NDBCLUSTER;

-- latin1 strings, apart: another helper is fixing how ndbgate decodes them
-- (MySQL's latin1 is cp1252).
CREATE TABLE latin (
  id  INT UNSIGNED NOT NULL PRIMARY KEY,
  c_l CHAR(10) CHARACTER SET latin1 NULL,
  v_l VARCHAR(40) CHARACTER SET latin1 NULL
) ENGINE=NDBCLUSTER;

-- BIT, ENUM and SET.
CREATE TABLE bits (
  id   INT UNSIGNED NOT NULL PRIMARY KEY,
  b1   BIT(1) NULL,
  b17  BIT(17) NULL,
  b64  BIT(64) NULL,
  e    ENUM('a','b','c d','é','😀') NULL,
  s    SET('x','y','z','w') NULL
) ENGINE=NDBCLUSTER;

-- Large objects: NDB keeps their parts in separate tables. JSON is not
-- here: NDB 7.5.0 refuses a JSON column (error 1112, "uses an extension
-- that doesn't exist"; NDB has it from 7.5.2), so the test tries a table
-- with one (json_doc) on its own, and skips it where the server refuses.
CREATE TABLE lobs (
  id  INT UNSIGNED NOT NULL PRIMARY KEY,
  tx  TEXT NULL,
  bl  BLOB NULL
) ENGINE=NDBCLUSTER;

-- A composite primary key of several types, in an order that is not the
-- columns' order.
CREATE TABLE composite (
  k_s   VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL,
  val   VARCHAR(40) CHARACTER SET utf8mb4 NULL,
  k_i   BIGINT NOT NULL,
  k_d   DATE NOT NULL,
  n     INT NULL,
  PRIMARY KEY (k_i, k_s, k_d)
) ENGINE=NDBCLUSTER;

-- Key columns of more types, partitioned on part of the primary key: NDB
-- hashes the distribution key alone to find a row.
CREATE TABLE partkey (
  tenant INT UNSIGNED NOT NULL,
  k_dec  DECIMAL(12,3) NOT NULL,
  k_dt   DATETIME(3) NOT NULL,
  k_bin  VARBINARY(16) NOT NULL,
  k_c    CHAR(8) CHARACTER SET utf8mb4 NOT NULL,
  val    VARCHAR(40) CHARACTER SET utf8mb4 NULL,
  amount DECIMAL(20,6) NULL,
  PRIMARY KEY (tenant, k_dec, k_dt, k_bin, k_c)
) ENGINE=NDBCLUSTER PARTITION BY KEY (tenant);

-- No primary key: NDB adds a hidden one ($PK). The row API must refuse it.
CREATE TABLE nopk (
  a INT NULL,
  b VARCHAR(20) CHARACTER SET utf8mb4 NULL
) ENGINE=NDBCLUSTER;

-- A UNIQUE key beside the primary key: NDB keeps it in a unique hash index,
-- which writes through the NDB API keep too.
CREATE TABLE uniq (
  id    INT UNSIGNED NOT NULL PRIMARY KEY,
  email VARCHAR(60) CHARACTER SET utf8mb4 NULL,
  n     INT NULL,
  UNIQUE KEY email (email)
) ENGINE=NDBCLUSTER;

-- A memcache container's table (tests/sqloracle's YAML): a VARCHAR key and
-- value columns of several types, which memcache sees joined by tabs.
CREATE TABLE kv (
  mkey   VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL PRIMARY KEY,
  v_str  VARCHAR(100) CHARACTER SET utf8mb4 NULL,
  v_int  INT NULL,
  v_u64  BIGINT UNSIGNED NULL,
  v_dec  DECIMAL(12,3) NULL,
  v_date DATE NULL,
  v_dt   DATETIME(3) NULL,
  v_dbl  DOUBLE NULL,
  v_flt  FLOAT NULL,
  flags  INT UNSIGNED NOT NULL DEFAULT 0,
  cas    BIGINT UNSIGNED NULL
) ENGINE=NDBCLUSTER;
