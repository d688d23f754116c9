/*
 * prime_deadline(ms): a time budget for the statements a connection runs next. better-sqlite3
 * exposes no sqlite3_interrupt and is built without the progress callback, so a reader thread
 * cannot stop its own long statement, and terminating the thread leaves the statement running
 * to its end. This extension keeps one watcher thread per connection: `SELECT prime_deadline(ms)`
 * arms it, and when `ms` pass before `SELECT prime_deadline(0)` disarms it, it calls
 * sqlite3_interrupt, which SQLite documents as safe from another thread: the running statement
 * fails with SQLITE_INTERRUPT at its next step and the connection stays usable.
 *
 * A server that shuts down must not wait out its reads' budgets: the connections of one pool
 * share a group (`SELECT prime_deadline_group(g)`), and `SELECT prime_interrupt_group(g)`, from
 * any connection of the process with the extension, interrupts the group's running statements
 * and makes every later budget of the group expire at once (a read handed to a thread just
 * before the shutdown). Groups keep other pools of the same process (tests) untouched.
 */
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct Deadline {
  sqlite3 *db;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long long deadline; /* CLOCK_MONOTONIC ms; 0: disarmed */
  long long fired;    /* interrupts made */
  int stop;
  long long group;    /* the pool's group; 0: none */
  pthread_t thread;
  struct Deadline *next;
} Deadline;

/* Every connection with the extension in this process (worker threads share the library). */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static Deadline *all = NULL;
/* Groups stopped by prime_interrupt_group: a few at a time are ever alive. */
#define STOPPED_MAX 64
static long long stopped[STOPPED_MAX];
static int stopped_next = 0;

static int is_stopped(long long group) {
  if (group == 0) return 0;
  for (int i = 0; i < STOPPED_MAX; i++)
    if (stopped[i] == group) return 1;
  return 0;
}

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
  pthread_mutex_lock(&all_mu);
  int gone = is_stopped(d->group);
  pthread_mutex_unlock(&all_mu);
  pthread_mutex_lock(&d->mu);
  d->deadline = ms > 0 ? now_ms() + (gone ? 0 : ms) : 0;
  long long fired = d->fired;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
  sqlite3_result_int64(ctx, fired);
}

/* prime_deadline_group(g): puts this connection in group g (its pool). */
static void group_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  Deadline *d = sqlite3_user_data(ctx);
  (void)argc;
  pthread_mutex_lock(&all_mu);
  d->group = sqlite3_value_int64(argv[0]);
  pthread_mutex_unlock(&all_mu);
  sqlite3_result_null(ctx);
}

/* prime_interrupt_group(g): interrupts the group's armed statements, and expires its later budgets at once; answers how many were interrupted. */
static void interrupt_group_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  long long group = sqlite3_value_int64(argv[0]);
  (void)argc;
  long long n = 0;
  pthread_mutex_lock(&all_mu);
  if (group != 0 && !is_stopped(group)) {
    stopped[stopped_next] = group;
    stopped_next = (stopped_next + 1) % STOPPED_MAX;
  }
  for (Deadline *d = all; d; d = d->next) {
    if (group == 0 || d->group != group) continue;
    pthread_mutex_lock(&d->mu);
    if (d->deadline != 0) {
      /* Safe from any thread while the connection is open: it is, since destroy takes all_mu first. */
      sqlite3_interrupt(d->db);
      d->deadline = 0;
      d->fired++;
      n++;
    }
    pthread_mutex_unlock(&d->mu);
  }
  pthread_mutex_unlock(&all_mu);
  sqlite3_result_int64(ctx, n);
}

static void destroy(void *p) {
  Deadline *d = p;
  pthread_mutex_lock(&all_mu);
  for (Deadline **at = &all; *at; at = &(*at)->next)
    if (*at == d) {
      *at = d->next;
      break;
    }
  pthread_mutex_unlock(&all_mu);
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
  /* The first function owns d (destroy runs when the connection closes); the others only use it. */
  int rc = sqlite3_create_function_v2(db, "prime_deadline", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, d, deadline_fn, NULL, NULL, destroy);
  if (rc == SQLITE_OK) rc = sqlite3_create_function_v2(db, "prime_deadline_group", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, d, group_fn, NULL, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_create_function_v2(db, "prime_interrupt_group", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, d, interrupt_group_fn, NULL, NULL, NULL);
  if (rc == SQLITE_OK) {
    pthread_mutex_lock(&all_mu);
    d->next = all;
    all = d;
    pthread_mutex_unlock(&all_mu);
  }
  return rc;
}
