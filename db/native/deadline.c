/*
 * prime_deadline(ms): a time budget for the statements a connection runs next. better-sqlite3
 * exposes no sqlite3_interrupt and is built without the progress callback, so a reader thread
 * cannot stop its own long statement, and terminating the thread leaves the statement running
 * to its end. This extension keeps one watcher thread per connection: `SELECT prime_deadline(ms)`
 * arms it, and when `ms` pass before `SELECT prime_deadline(0)` disarms it, it calls
 * sqlite3_interrupt, which SQLite documents as safe from another thread: the running statement
 * fails with SQLITE_INTERRUPT at its next step and the connection stays usable.
 */
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  sqlite3 *db;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long long deadline; /* CLOCK_MONOTONIC ms; 0: disarmed */
  long long fired;    /* interrupts made */
  int stop;
  pthread_t thread;
} Deadline;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *watch(void *arg) {
  Deadline *d = arg;
  pthread_mutex_lock(&d->mu);
  while (!d->stop) {
    if (d->deadline == 0) {
      pthread_cond_wait(&d->cv, &d->mu);
      continue;
    }
    long long left = d->deadline - now_ms();
    if (left <= 0) {
      sqlite3_interrupt(d->db);
      d->deadline = 0;
      d->fired++;
      continue;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += left / 1000;
    until.tv_nsec += (left % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&d->cv, &d->mu, &until);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

/* prime_deadline(ms): arms the budget (ms > 0) or disarms it (0); answers the interrupts made so far. */
static void deadline_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  Deadline *d = sqlite3_user_data(ctx);
  long long ms = sqlite3_value_int64(argv[0]);
  pthread_mutex_lock(&d->mu);
  d->deadline = ms > 0 ? now_ms() + ms : 0;
  long long fired = d->fired;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
  sqlite3_result_int64(ctx, fired);
}

static void destroy(void *p) {
  Deadline *d = p;
  pthread_mutex_lock(&d->mu);
  d->stop = 1;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->thread, NULL);
  pthread_cond_destroy(&d->cv);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_deadline_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
  SQLITE_EXTENSION_INIT2(api);
  (void)err;
  Deadline *d = calloc(1, sizeof *d);
  if (!d) return SQLITE_NOMEM;
  d->db = db;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, &attr);
  pthread_condattr_destroy(&attr);
  if (pthread_create(&d->thread, NULL, watch, d) != 0) {
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return SQLITE_ERROR;
  }
  return sqlite3_create_function_v2(db, "prime_deadline", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, d, deadline_fn, NULL, NULL, destroy);
}
