-- table
{
 "columns": [
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "id",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": false,
   "struct": null,
   "type": "int"
  },
  {
   "char_length": 2,
   "char_pad": 2,
   "char_type": "char(2)",
   "default": null,
   "has_default": false,
   "name": "code",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "string"
  },
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "s",
   "nested_chars": "struct<a:int,b:varchar(4)>",
   "not_null_fields": [
    "a"
   ],
   "nullable": true,
   "struct": {
    "fields": [
     {
      "name": "a",
      "type": {
       "name": "int"
      }
     },
     {
      "name": "b",
      "type": {
       "name": "string"
      }
     }
    ],
    "name": "struct"
   },
   "type": "struct<a:int,b:string>"
  },
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": "0",
   "has_default": false,
   "name": "n",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "bigint"
  },
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "dt",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "date"
  }
 ],
 "columns_by_name": {
  "code": {
   "char_length": 2,
   "char_pad": 2,
   "char_type": "char(2)",
   "default": null,
   "has_default": false,
   "name": "code",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "string"
  },
  "dt": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "dt",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "date"
  },
  "id": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "id",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": false,
   "struct": null,
   "type": "int"
  },
  "n": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": "0",
   "has_default": false,
   "name": "n",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "bigint"
  },
  "s": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "s",
   "nested_chars": "struct<a:int,b:varchar(4)>",
   "not_null_fields": [
    "a"
   ],
   "nullable": true,
   "struct": {
    "fields": [
     {
      "name": "a",
      "type": {
       "name": "int"
      }
     },
     {
      "name": "b",
      "type": {
       "name": "string"
      }
     }
    ],
    "name": "struct"
   },
   "type": "struct<a:int,b:string>"
  }
 },
 "created": "2026-11-01",
 "database": "db",
 "errors": [],
 "former_roots": [],
 "location": "file:/w/acc",
 "managed": true,
 "name": "db.acc",
 "partition_columns": [
  "dt"
 ],
 "properties": {
  "spark_merge.not_null": "s.a, nope",
  "spark_merge.table": "db.acc",
  "spark_merge.version": "3"
 },
 "provider": "parquet",
 "relation": "`db`.`acc`",
 "root": "file:/w/acc",
 "table_id": null,
 "table_name": "acc",
 "trust_errors": [
  "table property spark_merge.not_null of db.acc names \"nope\", which is not a column of it (its columns: id, code, s, n, dt); correct it with ALTER TABLE db.acc SET TBLPROPERTIES ('spark_merge.not_null' = '<column>,...')"
 ],
 "version": 3
}

-- view
{
 "columns": [
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "id",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": false,
   "struct": null,
   "type": "int"
  },
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "v",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "string"
  },
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "dt",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "date"
  }
 ],
 "columns_by_name": {
  "dt": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "dt",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "date"
  },
  "id": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "id",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": false,
   "struct": null,
   "type": "int"
  },
  "v": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "v",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "string"
  }
 },
 "created": null,
 "database": "db",
 "errors": [
  "target db.acc is a view; MERGE, UPDATE and DELETE need a table"
 ],
 "former_roots": [],
 "location": "file:/w/acc",
 "managed": false,
 "name": "db.acc",
 "partition_columns": [
  "dt"
 ],
 "properties": {
  "spark_merge.not_null": "id"
 },
 "provider": "parquet",
 "relation": "`db`.`acc`",
 "root": "file:/w/acc",
 "table_id": null,
 "table_name": "acc",
 "trust_errors": [],
 "version": 0
}

-- hive
{
 "columns": [
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "id",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": false,
   "struct": null,
   "type": "int"
  },
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "v",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "string"
  },
  {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "dt",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "date"
  }
 ],
 "columns_by_name": {
  "dt": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "dt",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "date"
  },
  "id": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "id",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": false,
   "struct": null,
   "type": "int"
  },
  "v": {
   "char_length": null,
   "char_pad": null,
   "char_type": null,
   "default": null,
   "has_default": false,
   "name": "v",
   "nested_chars": null,
   "not_null_fields": [],
   "nullable": true,
   "struct": null,
   "type": "string"
  }
 },
 "created": null,
 "database": "db",
 "errors": [
  "target db.acc is a Hive-format table (STORED AS); spark-merge rewrites datasource tables created with USING parquet or USING orc"
 ],
 "former_roots": [],
 "location": "file:/w/acc",
 "managed": true,
 "name": "db.acc",
 "partition_columns": [
  "dt"
 ],
 "properties": {
  "spark_merge.not_null": "id"
 },
 "provider": "hive",
 "relation": "`db`.`acc`",
 "root": "file:/w/acc",
 "table_id": null,
 "table_name": "acc",
 "trust_errors": [],
 "version": 0
}

