-- every_kind
{
 "clauses": [
  {
   "action": "delete",
   "by_source": false,
   "condition": "s.v IS NULL",
   "index": 0,
   "label": "WHEN MATCHED clause 1 (DELETE)",
   "matched": true,
   "op": 2,
   "outputs": {}
  },
  {
   "action": "update",
   "by_source": false,
   "condition": null,
   "index": 1,
   "label": "WHEN MATCHED clause 2 (UPDATE)",
   "matched": true,
   "op": 3,
   "outputs": {
    "v": "s.v"
   }
  },
  {
   "action": "insert",
   "by_source": false,
   "condition": null,
   "index": 2,
   "label": "WHEN NOT MATCHED clause 3 (INSERT)",
   "matched": false,
   "op": 1,
   "outputs": {
    "dt": "`s`.`dt`",
    "id": "`s`.`id`",
    "n": "`s`.`n`",
    "st": "`s`.`st`",
    "v": "`s`.`v`"
   }
  },
  {
   "action": "delete",
   "by_source": true,
   "condition": null,
   "index": 3,
   "label": "WHEN NOT MATCHED BY SOURCE clause 4 (DELETE)",
   "matched": false,
   "op": 2,
   "outputs": {}
  }
 ],
 "errors": [],
 "insert_only": false,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  },
  {
   "expect": "boolean",
   "expr": "s.v IS NULL",
   "label": "WHEN MATCHED clause 1 (DELETE) condition",
   "scope": "both"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "s.v",
   "label": "WHEN MATCHED clause 2 (UPDATE) value for column v",
   "scope": "both"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "`s`.`id`",
   "label": "WHEN NOT MATCHED clause 3 (INSERT) value for column id",
   "scope": "source"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "`s`.`v`",
   "label": "WHEN NOT MATCHED clause 3 (INSERT) value for column v",
   "scope": "source"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": null,
    "has_default": false,
    "name": "st",
    "nested_chars": null,
    "not_null_fields": [],
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
   "expect": "column",
   "expr": "`s`.`st`",
   "label": "WHEN NOT MATCHED clause 3 (INSERT) value for column st",
   "scope": "source"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": "7",
    "has_default": false,
    "name": "n",
    "nested_chars": null,
    "not_null_fields": [],
    "nullable": true,
    "struct": null,
    "type": "bigint"
   },
   "expect": "column",
   "expr": "`s`.`n`",
   "label": "WHEN NOT MATCHED clause 3 (INSERT) value for column n",
   "scope": "source"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "`s`.`dt`",
   "label": "WHEN NOT MATCHED clause 3 (INSERT) value for column dt",
   "scope": "source"
  }
 ]
}

-- set_columns_and_struct_fields
{
 "clauses": [
  {
   "action": "update",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN MATCHED clause 1 (UPDATE)",
   "matched": true,
   "op": 3,
   "outputs": {
    "st": "named_struct('a', (1), 'b', ('x'))",
    "v": "s.v"
   }
  }
 ],
 "errors": [],
 "insert_only": false,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "s.v",
   "label": "WHEN MATCHED clause 1 (UPDATE) value for column v",
   "scope": "both"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": null,
    "has_default": false,
    "name": "st",
    "nested_chars": null,
    "not_null_fields": [],
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
   "expect": "column",
   "expr": "named_struct('a', (1), 'b', ('x'))",
   "label": "WHEN MATCHED clause 1 (UPDATE) value for column st",
   "scope": "both"
  }
 ]
}

-- insert_list_with_defaults
{
 "clauses": [
  {
   "action": "insert",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN NOT MATCHED clause 1 (INSERT)",
   "matched": false,
   "op": 1,
   "outputs": {
    "id": "s.id",
    "n": "(7)",
    "v": "NULL"
   }
  }
 ],
 "errors": [],
 "insert_only": true,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "s.id",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column id",
   "scope": "source"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "NULL",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column v",
   "scope": "source"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": "7",
    "has_default": false,
    "name": "n",
    "nested_chars": null,
    "not_null_fields": [],
    "nullable": true,
    "struct": null,
    "type": "bigint"
   },
   "expect": "column",
   "expr": "(7)",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column n",
   "scope": "source"
  }
 ]
}

-- refused_set
{
 "clauses": [
  {
   "action": "update",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN MATCHED clause 1 (UPDATE)",
   "matched": true,
   "op": 3,
   "outputs": {
    "st": "s.st",
    "v": "1"
   }
  }
 ],
 "errors": [
  "WHEN MATCHED clause 1 (UPDATE): SET assigns unknown column vv (did you mean v?) (target db.acc has: id, v, st, n, dt; a qualifier must be the target alias t)",
  "WHEN MATCHED clause 1 (UPDATE): column v is assigned more than once",
  "WHEN MATCHED clause 1 (UPDATE): column st is assigned whole and by field (st.a); assign one or the other",
  "WHEN MATCHED clause 1 (UPDATE): SET dt.x: only struct fields can be assigned, and dt has type date"
 ],
 "insert_only": false,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "1",
   "label": "WHEN MATCHED clause 1 (UPDATE) value for column v",
   "scope": "both"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": null,
    "has_default": false,
    "name": "st",
    "nested_chars": null,
    "not_null_fields": [],
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
   "expect": "column",
   "expr": "s.st",
   "label": "WHEN MATCHED clause 1 (UPDATE) value for column st",
   "scope": "both"
  }
 ]
}

-- refused_insert_count
{
 "clauses": [
  {
   "action": "insert",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN NOT MATCHED clause 1 (INSERT)",
   "matched": false,
   "op": 1,
   "outputs": {
    "n": "(7)"
   }
  }
 ],
 "errors": [
  "WHEN NOT MATCHED clause 1 (INSERT): INSERT lists 2 column(s) but 1 value(s)",
  "WHEN NOT MATCHED clause 1 (INSERT): INSERT gives no value for NOT NULL column id"
 ],
 "insert_only": true,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": "7",
    "has_default": false,
    "name": "n",
    "nested_chars": null,
    "not_null_fields": [],
    "nullable": true,
    "struct": null,
    "type": "bigint"
   },
   "expect": "column",
   "expr": "(7)",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column n",
   "scope": "source"
  }
 ]
}

-- refused_insert_names
{
 "clauses": [
  {
   "action": "insert",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN NOT MATCHED clause 1 (INSERT)",
   "matched": false,
   "op": 1,
   "outputs": {
    "id": "1",
    "n": "(7)"
   }
  }
 ],
 "errors": [
  "WHEN NOT MATCHED clause 1 (INSERT): column id is listed more than once in INSERT",
  "WHEN NOT MATCHED clause 1 (INSERT): INSERT names unknown column vv (did you mean v?) (target db.acc has: id, v, st, n, dt)"
 ],
 "insert_only": true,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "1",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column id",
   "scope": "source"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": "7",
    "has_default": false,
    "name": "n",
    "nested_chars": null,
    "not_null_fields": [],
    "nullable": true,
    "struct": null,
    "type": "bigint"
   },
   "expect": "column",
   "expr": "(7)",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column n",
   "scope": "source"
  }
 ]
}

-- refused_insert_not_null
{
 "clauses": [
  {
   "action": "insert",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN NOT MATCHED clause 1 (INSERT)",
   "matched": false,
   "op": 1,
   "outputs": {
    "n": "(7)",
    "v": "'x'"
   }
  }
 ],
 "errors": [
  "WHEN NOT MATCHED clause 1 (INSERT): INSERT gives no value for NOT NULL column id"
 ],
 "insert_only": true,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  },
  {
   "column": {
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
   "expect": "column",
   "expr": "'x'",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column v",
   "scope": "source"
  },
  {
   "column": {
    "char_length": null,
    "char_pad": null,
    "char_type": null,
    "default": "7",
    "has_default": false,
    "name": "n",
    "nested_chars": null,
    "not_null_fields": [],
    "nullable": true,
    "struct": null,
    "type": "bigint"
   },
   "expect": "column",
   "expr": "(7)",
   "label": "WHEN NOT MATCHED clause 1 (INSERT) value for column n",
   "scope": "source"
  }
 ]
}

-- refused_clauses
{
 "clauses": [
  {
   "action": "delete",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN MATCHED clause 1 (DELETE)",
   "matched": true,
   "op": 2,
   "outputs": {}
  },
  {
   "action": "delete",
   "by_source": false,
   "condition": null,
   "index": 1,
   "label": "WHEN MATCHED clause 2 (DELETE)",
   "matched": true,
   "op": 2,
   "outputs": {}
  },
  {
   "action": "update",
   "by_source": true,
   "condition": null,
   "index": 2,
   "label": "WHEN NOT MATCHED BY SOURCE clause 3 (UPDATE)",
   "matched": false,
   "op": 3,
   "outputs": {}
  }
 ],
 "errors": [
  "WHEN MATCHED clause 2 (DELETE): unreachable, because WHEN MATCHED clause 1 (DELETE) before it has no condition; give that clause an AND condition or move it last",
  "WHEN NOT MATCHED BY SOURCE clause 3 (UPDATE): UPDATE SET * needs a source row, and a NOT MATCHED BY SOURCE row has none; assign the columns (SET col = an expression over the target columns)"
 ],
 "insert_only": false,
 "parts": [
  {
   "expect": "boolean",
   "expr": "t.id = s.id",
   "label": "ON condition",
   "scope": "both"
  }
 ]
}

-- refused_sourceless_star
{
 "clauses": [
  {
   "action": "update",
   "by_source": false,
   "condition": null,
   "index": 0,
   "label": "WHEN MATCHED clause 1 (UPDATE)",
   "matched": true,
   "op": 3,
   "outputs": {}
  }
 ],
 "errors": [
  "WHEN MATCHED clause 1 (UPDATE): SET * / INSERT * need a source"
 ],
 "insert_only": false,
 "parts": [
  {
   "expect": "boolean",
   "expr": "true",
   "label": "WHERE condition",
   "scope": "both"
  }
 ]
}

