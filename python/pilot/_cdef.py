"""pilot._cdef - libpilot's declarations for cffi (made by scripts/gen-cdef.py
from lib/pilot.h: do not edit; make cdef writes it again)"""

CDEF = """
#define PILOT_API_VERSION 1
#define PILOT_STDOUT 1
#define PILOT_STDERR 2
#define PILOT_LOGS_LABEL 1
struct pilot;
struct pilot_error {
    int errnum;
    char text[256];
};
int pilot_api_version(void);
struct pilot *pilot_open(const char *id, const char *home, int timeout_ms,
                         struct pilot_error *err);
void pilot_close(struct pilot *p);
const char *pilot_id(const struct pilot *p);
const char *pilot_dir(const struct pilot *p);
int pilot_is_live(struct pilot *p);
int pilot_submit(struct pilot *p, const char *specs_json, char **reply_json,
                 struct pilot_error *err);
int pilot_call(struct pilot *p, const char *op, const char *args_json,
               char **reply_json, struct pilot_error *err);
int pilot_log_path(const struct pilot *p, uint64_t id, unsigned attempt,
                   int stream, char *buf, size_t len);
void pilot_free(void *ptr);
int pilot_submit_opts(struct pilot *p, const char *specs_json,
                      const char *opts_json, char **reply_json,
                      struct pilot_error *err);
struct pilot_watch;
struct pilot_watch *pilot_watch_open(struct pilot *p, const char *args_json,
                                     struct pilot_error *err);
int pilot_watch_add(struct pilot_watch *w, const char *ids_json,
                    struct pilot_error *err);
const char *pilot_watch_token(const struct pilot_watch *w);
int pilot_watch_next(struct pilot_watch *w, int timeout_ms, char **ends_json,
                     struct pilot_error *err);
uint64_t pilot_watch_last_seq(const struct pilot_watch *w);
uint64_t pilot_watch_pending(const struct pilot_watch *w);
void pilot_watch_close(struct pilot_watch *w, int unwatch);
struct pilot_logs;
struct pilot_logs *pilot_logs_open(const struct pilot *p,
                                   const char *task_json, unsigned attempt,
                                   int stream, long rank, int flags,
                                   struct pilot_error *err);
int pilot_logs_read(struct pilot_logs *l, int final, char **data,
                    size_t *len, struct pilot_error *err);
int pilot_logs_paths(const struct pilot_logs *l, char **paths_json,
                     struct pilot_error *err);
void pilot_logs_close(struct pilot_logs *l);
"""
