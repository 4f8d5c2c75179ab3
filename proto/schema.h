/* proto/schema.h - the SQLite schema of a pilot's state (docs/state.md) */
#ifndef PL_PROTO_SCHEMA_H
#define PL_PROTO_SCHEMA_H

/* N.B. bump PL_SCHEMA_VERSION (meta 'schema') when this changes. */
/* schema 13: a task queued at its submission has no events row for it
 * (10 million queued were 10 million rows): readers make that first
 * event from tasks.submit_time (pl_query_task()) when no task event of
 * state queued or waiting has that time (a database of schema 12 has
 * it).  Nothing else changed: 12 opens as 13 as it is. */
#define PL_SCHEMA_VERSION 13

#define PL_SCHEMA_SQL                                                          \
    "CREATE TABLE IF NOT EXISTS meta ("                                        \
    "  key TEXT PRIMARY KEY, value TEXT);"                                     \
    "CREATE TABLE IF NOT EXISTS tasks ("                                       \
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"                                  \
    "  name TEXT,"                                                             \
    "  argv TEXT NOT NULL,"       /* JSON array of strings */                  \
    "  env TEXT,"                 /* JSON array of KEY=VALUE, or NULL */       \
    "  cwd TEXT,"                                                              \
    "  ranks INTEGER NOT NULL DEFAULT 1,"                                      \
    "  nodes INTEGER NOT NULL DEFAULT 0,"      /* exactly N nodes; 0 any */    \
    "  ranks_per_node INTEGER NOT NULL DEFAULT 0,"                             \
    "  exclusive INTEGER NOT NULL DEFAULT 0,"                                  \
    "  comm TEXT NOT NULL DEFAULT 'none',"                                     \
    "  launcher TEXT,"            /* comm mpi: srun or mpirun */              \
    "  cores_per_rank INTEGER NOT NULL DEFAULT 1,"                             \
    "  gpus_per_rank INTEGER NOT NULL DEFAULT 0,"                              \
    "  timeout REAL,"                                                          \
    "  retries INTEGER NOT NULL DEFAULT 0,"                                    \
    "  state TEXT NOT NULL,"                                                   \
    "  reason TEXT,"                                                           \
    "  node TEXT,"                /* where the last attempt ran */             \
    "  cores TEXT,"               /* its CPU ids, "0,1" */                     \
    "  gpus TEXT,"                /* its GPU ids (SLURM_STEP_GPUS) */          \
    "  attempts INTEGER NOT NULL DEFAULT 0,"                                   \
    "  exit_code INTEGER,"                                                     \
    "  signal INTEGER,"                                                        \
    "  submit_time REAL NOT NULL,"                                             \
    "  start_time REAL,"                                                       \
    "  end_time REAL,"                                                         \
    "  maxrss_kb INTEGER,"                                                     \
    "  after TEXT,"               /* JSON [[id, any]]: waits for these */      \
    "  array_id INTEGER,"         /* the id of its array's first element */    \
    "  array_index INTEGER,"      /* its index in the array */                 \
    "  priority INTEGER NOT NULL DEFAULT 0," /* higher starts first */        \
    "  tags TEXT,"                /* JSON {"key": "value"}, or NULL */        \
    "  submitted_by TEXT,"        /* the name of the key it came with */     \
    "  output_limit INTEGER,"     /* bytes; NULL: the default */            \
    "  pool TEXT,"                /* a pool task's pool (docs/pool.md) */  \
    "  fn TEXT,"                  /* c, py; pool: that pool's own job */   \
    "  end_seq INTEGER,"          /* pilotd's end sequence (watches) */    \
    /* schema 11: what the last attempt used (its ranks summed; NULL: */    \
    /* not measured): CPU seconds, and its GPUs sampled through NVML   */    \
    "  cpu_user REAL,"                                                         \
    "  cpu_sys REAL,"                                                          \
    "  gpu_util REAL,"            /* mean % busy of its GPUs */              \
    "  gpu_mem_mb INTEGER,"       /* the most memory its GPUs held */        \
    "  gpu_power_w REAL,"         /* mean power of its GPUs */               \
    "  vetted INTEGER);"          /* schema 11: --vetted minutes, or NULL */ \
    "CREATE INDEX IF NOT EXISTS tasks_state ON tasks(state);"                  \
    "CREATE TABLE IF NOT EXISTS events ("                                      \
    "  id INTEGER PRIMARY KEY,"                                                \
    "  task INTEGER NOT NULL,"                                                 \
    "  time REAL NOT NULL,"                                                    \
    "  state TEXT NOT NULL,"                                                   \
    "  attempt INTEGER,"                                                       \
    "  node TEXT,"                                                             \
    "  cores TEXT,"                                                            \
    "  gpus TEXT,"                                                             \
    "  detail TEXT,"                                                           \
    "  rank INTEGER);"            /* NULL: the task's own event */            \
    "CREATE INDEX IF NOT EXISTS events_task ON events(task);"                  \
    "CREATE TABLE IF NOT EXISTS nodes ("                                       \
    "  name TEXT PRIMARY KEY,"                                                 \
    "  cores TEXT,"               /* CPU ids "0,1,2,3" */                      \
    "  gpus TEXT,"                /* GPU ids */                                \
    "  state TEXT NOT NULL,"      /* up, lost, down */                         \
    "  joined REAL,"                                                           \
    "  last_seen REAL,"                                                        \
    "  cordon TEXT,"              /* schema 11: NULL, or why nothing new */  \
                                  /* is placed there */                      \
    "  vet TEXT,"                 /* its last vetting, JSON */               \
    "  vet_time REAL);"                                                        \
    /* schema 9: a Python call's input, read at dispatch (not kept in    */   \
    /* pilotd's memory: a million queued calls), and its result          */   \
    "CREATE TABLE IF NOT EXISTS pyinputs ("                                    \
    "  task INTEGER PRIMARY KEY,"                                              \
    "  input BLOB,"               /* the pickled call, or NULL */              \
    "  input_file TEXT,"          /* ... or the file holding it */             \
    "  prelude TEXT,"             /* run once by each worker */                \
    "  python TEXT,"              /* the interpreter; NULL: python3 */        \
    "  refs TEXT);"               /* schema 10: JSON [id...], the calls */    \
                                  /* whose values it receives, or NULL */     \
    "CREATE TABLE IF NOT EXISTS results ("                                     \
    "  task INTEGER PRIMARY KEY,"                                              \
    "  attempt INTEGER NOT NULL,"                                              \
    "  status TEXT NOT NULL,"     /* ok, raised */                             \
    "  size INTEGER NOT NULL,"    /* bytes of the pickle */                    \
    "  data BLOB,"                /* the pickle, or NULL: in 'file' */         \
    "  file TEXT,"                                                             \
    "  repr TEXT);"               /* repr() of the value, cut at 1 KiB */

/* Run after PL_SCHEMA_SQL (each statement alone: a column a database of
 * schema 3 to 10 lacks), then PL_SCHEMA_INDEXES. */
#define PL_SCHEMA_NEW_COLUMNS                                                  \
    { "ALTER TABLE tasks ADD COLUMN after TEXT",                               \
      "ALTER TABLE tasks ADD COLUMN array_id INTEGER",                         \
      "ALTER TABLE tasks ADD COLUMN array_index INTEGER",                      \
      "ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",      \
      "ALTER TABLE tasks ADD COLUMN tags TEXT",                                \
      "ALTER TABLE tasks ADD COLUMN submitted_by TEXT",                        \
      "ALTER TABLE tasks ADD COLUMN output_limit INTEGER",                     \
      "ALTER TABLE tasks ADD COLUMN pool TEXT",                                \
      "ALTER TABLE tasks ADD COLUMN fn TEXT",                                  \
      "ALTER TABLE tasks ADD COLUMN end_seq INTEGER",                          \
      "ALTER TABLE pyinputs ADD COLUMN refs TEXT",                            \
      "ALTER TABLE tasks ADD COLUMN cpu_user REAL",                            \
      "ALTER TABLE tasks ADD COLUMN cpu_sys REAL",                             \
      "ALTER TABLE tasks ADD COLUMN gpu_util REAL",                            \
      "ALTER TABLE tasks ADD COLUMN gpu_mem_mb INTEGER",                      \
      "ALTER TABLE tasks ADD COLUMN gpu_power_w REAL",                        \
      "ALTER TABLE nodes ADD COLUMN cordon TEXT",                              \
      "ALTER TABLE nodes ADD COLUMN vet TEXT",                                 \
      "ALTER TABLE nodes ADD COLUMN vet_time REAL",                           \
      "ALTER TABLE tasks ADD COLUMN vetted INTEGER" }
#define PL_SCHEMA_INDEXES                                                      \
    "CREATE INDEX IF NOT EXISTS tasks_name ON tasks(name)"                     \
    "  WHERE name IS NOT NULL;"                                                \
    "DROP INDEX IF EXISTS tasks_array;"        /* schema 4's */                \
    "CREATE INDEX IF NOT EXISTS tasks_elem ON tasks(array_id, array_index)"   \
    "  WHERE array_id IS NOT NULL;"                                            \
    "CREATE INDEX IF NOT EXISTS tasks_fn ON tasks(fn) WHERE fn IS NOT NULL;"  \
    "CREATE INDEX IF NOT EXISTS tasks_end_seq ON tasks(end_seq)"              \
    "  WHERE end_seq IS NOT NULL;"                                             \
    /* schema 12: the queue rebuilt from indexes alone at a restart     */  \
    /* (tasks_state has the ids; this the few with a priority)          */  \
    "CREATE INDEX IF NOT EXISTS tasks_prio ON tasks(priority)"                 \
    "  WHERE priority != 0;"

#endif /* !PL_PROTO_SCHEMA_H */
