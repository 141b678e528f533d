-- boolean_tombstone
{
 "errors": [],
 "mode": "copy-on-write",
 "order": "struct(CAST({p}`wm` AS decimal(12,2)), coalesce({p}`gone`, false), to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date))))",
 "order_parts": [
  "CAST({p}`wm` AS decimal(12,2))",
  "coalesce({p}`gone`, false)"
 ],
 "pk": [
  "`id`"
 ],
 "primary_key": [
  "id"
 ],
 "row": "to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date)))",
 "tombstone": "coalesce({p}`gone`, false)",
 "watermark_key": [
  "wm"
 ]
}

-- string_tombstone
{
 "errors": [],
 "mode": "copy-on-write",
 "order": "struct(CAST({p}`wm` AS decimal(12,2)), CAST({p}`dt` AS date), coalesce({p}`op` = 'D', false), to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date))))",
 "order_parts": [
  "CAST({p}`wm` AS decimal(12,2))",
  "CAST({p}`dt` AS date)",
  "coalesce({p}`op` = 'D', false)"
 ],
 "pk": [
  "`id`"
 ],
 "primary_key": [
  "id"
 ],
 "row": "to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date)))",
 "tombstone": "coalesce({p}`op` = 'D', false)",
 "watermark_key": [
  "wm",
  "dt"
 ]
}

-- merge_on_read
{
 "errors": [],
 "mode": "merge-on-read",
 "order": "struct(CAST({p}`wm` AS decimal(12,2)), false, to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date))))",
 "order_parts": [
  "CAST({p}`wm` AS decimal(12,2))",
  "false"
 ],
 "pk": [
  "`id`"
 ],
 "primary_key": [
  "id"
 ],
 "row": "to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date)))",
 "tombstone": "false",
 "watermark_key": [
  "wm"
 ]
}

-- refused
{
 "errors": [
  "upsert: unknown column idd (did you mean id?) (target db.acc has: id, v, wm, gone, op, dt)",
  "upsert: primary_key names column idd, which the source does not have (its columns: id, v)",
  "upsert: tombstone_key names column op, which the source does not have (its columns: id, v)",
  "upsert: the source lacks column(s) wm, gone, dt of db.acc; an upsert writes whole rows, so add them to the source (e.g. NULL AS wm)",
  "upsert: upsert_mode merge-on-read needs watermark_key (the log is reduced to the freshest row of each key by it)",
  "upsert: tombstone column op is a string: set tombstone_string_key_value (or the table property spark_merge.tombstone_string_key_value)"
 ],
 "mode": "merge-on-read",
 "order": "struct(false, to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date))))",
 "order_parts": [
  "false"
 ],
 "pk": [
  "`idd`"
 ],
 "primary_key": [
  "idd"
 ],
 "row": "to_json(named_struct('id', CAST({p}`id` AS int), 'v', CAST({p}`v` AS string), 'wm', CAST({p}`wm` AS decimal(12,2)), 'gone', CAST({p}`gone` AS boolean), 'op', CAST({p}`op` AS string), 'dt', CAST({p}`dt` AS date)))",
 "tombstone": "false",
 "watermark_key": []
}

