-- aggregation_fields
{
 "delimiter": {
  "s": ";"
 },
 "distinct": [
  "s",
  "l"
 ],
 "engine": "aggregation",
 "errors": [],
 "fn": {
  "a": "sum",
  "b": "max",
  "l": "collect",
  "m": "last_non_null_value",
  "n": "nested_update",
  "s": "listagg",
  "ts": "last_non_null_value"
 },
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [
  "a"
 ],
 "kind_field": "s",
 "nested_key": {
  "n": [
   "k1"
  ]
 },
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": []
}

-- partial_update_groups
{
 "delimiter": {},
 "distinct": [],
 "engine": "partial-update",
 "errors": [],
 "fn": {
  "a": "last_non_null_value",
  "b": "max",
  "l": "last_non_null_value",
  "m": "last_non_null_value",
  "n": "last_non_null_value",
  "s": "last_non_null_value"
 },
 "groups": [
  {
   "fields": [
    "a",
    "b"
   ],
   "name": "ts",
   "seq": [
    "ts"
   ]
  }
 ],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": []
}

-- deduplicate_sequence
{
 "delimiter": {},
 "distinct": [],
 "engine": "deduplicate",
 "errors": [],
 "fn": {},
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": [
  "ts",
  "a"
 ]
}

-- refused_basics
{
 "delimiter": {},
 "distinct": [],
 "engine": "dedup",
 "errors": [
  "merge_engine: unknown engine dedup (expected one of deduplicate, partial-update, aggregation, first-row)",
  "merge_engine: primary_key (one or more columns) is required",
  "merge_engine: unknown column nope (target db.acc has: id, a, b, s, l, n, ts, m)",
  "sequence_field l must have a comparable primitive type, not array<string>",
  "merge_engine works with upsert_mode copy-on-write only, got merge-on-read",
  "merge_engine and watermark_key/tombstone_key are two kinds of upsert: choose one (a sequence_field orders records in an engine)"
 ],
 "fn": {},
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [],
 "remove_on_delete": false,
 "seq": [
  "nope",
  "l"
 ]
}

-- refused_first_row
{
 "delimiter": {},
 "distinct": [],
 "engine": "first-row",
 "errors": [
  "merge_engine first-row keeps the first row in input order: sequence_field is not allowed",
  "aggregate_function applies to the partial-update and aggregation engines, not first-row"
 ],
 "fn": {
  "a": "sum"
 },
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": [
  "a"
 ]
}

-- refused_functions
{
 "delimiter": {},
 "distinct": [
  "a"
 ],
 "engine": "aggregation",
 "errors": [
  "aggregate_function: id is a primary key column and cannot be aggregated",
  "aggregate_function: unknown column zz (target db.acc has: id, a, b, s, l, n, ts, m)",
  "aggregate_function: unknown function median for a (known: bool_and, bool_or, collect, count, first_non_null_value, first_value, last_non_null_value, last_value, listagg, max, merge_map, min, nested_update, product, sum)",
  "aggregate_function sum does not take column s of type string (it takes numeric types)",
  "default_aggregate_function: unknown function nope (known: bool_and, bool_or, collect, count, first_non_null_value, first_value, last_non_null_value, last_value, listagg, max, merge_map, min, nested_update, product, sum)",
  "ignore_retract: column b has no aggregate function",
  "distinct: column a is not aggregated with collect or listagg",
  "nested_key: column a is not aggregated with nested_update",
  "nested_key: column n is not aggregated with nested_update",
  "listagg_delimiter: column b is not aggregated with listagg"
 ],
 "fn": {
  "s": "sum"
 },
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [
  "b"
 ],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": []
}

-- refused_not_a_mapping
{
 "delimiter": {},
 "distinct": [],
 "engine": "aggregation",
 "errors": [
  "aggregate_function must map field to function, got sum",
  "sequence_group must map sequence field(s) to the fields of the group, got ts"
 ],
 "fn": {
  "a": "last_non_null_value",
  "b": "last_non_null_value",
  "l": "last_non_null_value",
  "m": "last_non_null_value",
  "n": "last_non_null_value",
  "s": "last_non_null_value",
  "ts": "last_non_null_value"
 },
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": []
}

-- refused_groups
{
 "delimiter": {},
 "distinct": [],
 "engine": "partial-update",
 "errors": [
  "aggregate_function max does not take column m of type map<string,int> (it takes comparable types)",
  "sequence_group ts: id is a primary key column",
  "sequence_group ts: unknown column zz (target db.acc has: id, a, b, s, l, n, ts, m)",
  "sequence_group s: column a is already in sequence group ts",
  "sequence_group s: sequence field s must be numeric, a date or a timestamp, not string",
  "sequence_group b: the group has no fields",
  "remove_record_on_delete and ignore_delete contradict each other (a -D record removes the row, or is dropped): set one",
  "aggregate_function max on m: a partial-update field with a function other than last_non_null_value must be in a sequence_group"
 ],
 "fn": {
  "m": "max"
 },
 "groups": [
  {
   "fields": [
    "a",
    "id",
    "zz"
   ],
   "name": "ts",
   "seq": [
    "ts"
   ]
  },
  {
   "fields": [
    "a"
   ],
   "name": "s",
   "seq": [
    "s"
   ]
  },
  {
   "fields": [],
   "name": "b",
   "seq": [
    "b"
   ]
  }
 ],
 "ignore_delete": true,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": true,
 "seq": []
}

-- refused_remove_on_delete
{
 "delimiter": {},
 "distinct": [],
 "engine": "deduplicate",
 "errors": [
  "sequence_group applies to the partial-update engine only",
  "remove_record_on_delete applies to the partial-update and aggregation engines, not deduplicate (a -D record already deletes its row)"
 ],
 "fn": {},
 "groups": [
  {
   "fields": [
    "a"
   ],
   "name": "ts",
   "seq": [
    "ts"
   ]
  }
 ],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": true,
 "seq": []
}

-- refused_default_function
{
 "delimiter": {},
 "distinct": [],
 "engine": "deduplicate",
 "errors": [
  "default_aggregate_function applies to the partial-update and aggregation engines, not deduplicate"
 ],
 "fn": {},
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": []
}

-- refused_default_type
{
 "delimiter": {},
 "distinct": [],
 "engine": "aggregation",
 "errors": [
  "default_aggregate_function sum does not take column s of type string (it takes numeric types)",
  "default_aggregate_function sum does not take column l of type array<string> (it takes numeric types)",
  "default_aggregate_function sum does not take column n of type array<struct<k1:int,v:string>> (it takes numeric types)",
  "default_aggregate_function sum does not take column ts of type timestamp (it takes numeric types)",
  "default_aggregate_function sum does not take column m of type map<string,int> (it takes numeric types)"
 ],
 "fn": {
  "a": "sum",
  "b": "sum",
  "l": "sum",
  "m": "sum",
  "n": "sum",
  "s": "sum",
  "ts": "sum"
 },
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": []
}

-- refused_groups_and_removal
{
 "delimiter": {},
 "distinct": [],
 "engine": "partial-update",
 "errors": [
  "remove_record_on_delete and sequence_group contradict each other (with sequence groups a -D record retracts its group): set one"
 ],
 "fn": {},
 "groups": [
  {
   "fields": [
    "a"
   ],
   "name": "ts",
   "seq": [
    "ts"
   ]
  }
 ],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {},
 "pk": [
  "id"
 ],
 "remove_on_delete": true,
 "seq": []
}

-- refused_nested_key
{
 "delimiter": {},
 "distinct": [],
 "engine": "aggregation",
 "errors": [
  "nested_key: k9 is not a field of n (array<struct<k1:int,v:string>>)"
 ],
 "fn": {
  "a": "last_non_null_value",
  "b": "last_non_null_value",
  "l": "last_non_null_value",
  "m": "last_non_null_value",
  "n": "nested_update",
  "s": "last_non_null_value",
  "ts": "last_non_null_value"
 },
 "groups": [],
 "ignore_delete": false,
 "ignore_retract": [],
 "kind_field": null,
 "nested_key": {
  "n": [
   "k9"
  ]
 },
 "pk": [
  "id"
 ],
 "remove_on_delete": false,
 "seq": []
}

