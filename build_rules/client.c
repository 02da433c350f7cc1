/* tileir-client: run one build action through the tileiras cache server.
 *
 *     tileir-client SOCKET PROGRAM [ARGS...]
 *
 * A build starts the compiler hundreds of times, and with a warm compile
 * cache nearly all of the time goes to starting Python. So CMake runs each
 * action as `tileir-client SOCKET python launch.py TOOL ARGS...`: the client
 * asks the server listening on SOCKET (tileiras/cache/server.py, which has
 * the compiler imported already) to answer the action from the cache. When
 * the server answers, the client prints what the action printed and exits
 * with its status. In every other case (no server yet, an action the cache
 * cannot answer, any protocol error) the client becomes PROGRAM ARGS itself
 * (execvp), with TILEIRAS_SERVER_SOCKET=SOCKET set so that launch.py starts a
 * server for the next actions. So the client never decides anything about a
 * compile: the worst it can do is take the ordinary path.
 *
 * Protocol (little-endian u32 lengths; see tileiras/cache/server.py):
 *   request:  "TLRS1\n", u32 argc, argc strings (PROGRAM ARGS...), the working
 *             directory, u32 envc, envc strings "NAME=VALUE"; a string is u32 length + bytes
 *   reply:    u8 answered (1) or not (0); when answered: u32 exit status,
 *             stdout bytes, stderr bytes (each u32 length + bytes)
 *
 * Plain POSIX C that also compiles as C++.
 */
/* POSIX plus flock and usleep, also under a strict -std=c99 of the project's flags. */
#define _DEFAULT_SOURCE 1
#define _DARWIN_C_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

#define MAGIC "TLRS1\n"
/* A hit takes milliseconds; a server that does not answer in this long is
   taken as gone, and the action runs the ordinary way (outputs are written
   atomically, so a late answer cannot leave a torn file). */
#define REPLY_TIMEOUT_S 60
/* While a server is starting (its lock is held, its socket not there yet),
   waiting for it is cheaper than starting Python for the action. */
#define START_WAIT_MS 3000
#define START_POLL_MS 5

typedef struct {
  char *data;
  size_t len, cap;
} buffer;

static int buf_put(buffer *b, const void *data, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    char *grown = (char *)realloc(b->data, cap);
    if (!grown) return -1;
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, n);
  b->len += n;
  return 0;
}

static int buf_u32(buffer *b, uint32_t v) {
  unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                         (unsigned char)(v >> 24)};
  return buf_put(b, le, 4);
}

static int buf_str(buffer *b, const char *s) {
  size_t n = strlen(s);
  return (n > 0xffffffffu || buf_u32(b, (uint32_t)n) || buf_put(b, s, n)) ? -1 : 0;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *dst, size_t n) {
  char *p = (char *)dst;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int read_u32(int fd, uint32_t *v) {
  unsigned char le[4];
  if (read_all(fd, le, 4)) return -1;
  *v = (uint32_t)le[0] | (uint32_t)le[1] << 8 | (uint32_t)le[2] << 16 | (uint32_t)le[3] << 24;
  return 0;
}

/* Reads one length-prefixed blob into a fresh allocation (NULL on error). */
static char *read_blob(int fd, uint32_t *len) {
  if (read_u32(fd, len) || *len > (1u << 30)) return NULL;
  char *data = (char *)malloc(*len ? *len : 1);
  if (data && read_all(fd, data, *len)) {
    free(data);
    return NULL;
  }
  return data;
}

/* Connects to the Unix socket at `path`; a path too long for sun_path is
   reached from its directory. Returns the socket, or -1. */
static int connect_server(const char *path) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  const char *name = path;
  int home = -1;
  if (strlen(path) >= sizeof addr.sun_path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return -1;
    char dir[PATH_MAX];
    size_t dlen = (size_t)(slash - path);
    if (dlen == 0 || dlen >= sizeof dir) return -1;
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    name = slash + 1;
    if (strlen(name) >= sizeof addr.sun_path) return -1;
    home = open(".", O_RDONLY);
    if (home < 0 || chdir(dir) != 0) {
      if (home >= 0) close(home);
      return -1;
    }
  }
  memcpy(addr.sun_path, name, strlen(name) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  int ok = fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
  if (home >= 0) {
    ok = fchdir(home) == 0 && ok; /* the fallback must run where it was started */
    close(home);
  }
  if (!ok) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* Whether a server holds the lock beside the socket: one runs or is starting. */
static int server_starting(const char *socket_path) {
  char lock[PATH_MAX];
  if ((size_t)snprintf(lock, sizeof lock, "%s.lock", socket_path) >= sizeof lock) return 0;
  int fd = open(lock, O_RDONLY);
  if (fd < 0) return 0;
  int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd); /* drops the shared lock if it was free */
  return held;
}

/* Asks the server; returns 1 with *status set when it answered, else 0. */
static int ask_server(const char *socket_path, int argc, char **argv, int *status) {
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return 0;
  buffer req = {NULL, 0, 0};
  int bad = buf_put(&req, MAGIC, strlen(MAGIC)) || buf_u32(&req, (uint32_t)argc);
  for (int i = 0; i < argc && !bad; i++) bad = buf_str(&req, argv[i]);
  bad = bad || buf_str(&req, cwd);
  uint32_t envc = 0;
  for (char **e = environ; *e; e++) envc++;
  bad = bad || buf_u32(&req, envc);
  for (char **e = environ; *e && !bad; e++) bad = buf_str(&req, *e);
  if (bad) {
    free(req.data);
    return 0;
  }

  int fd = connect_server(socket_path);
  for (int waited = 0; fd < 0 && waited < START_WAIT_MS && server_starting(socket_path);
       waited += START_POLL_MS) {
    usleep(START_POLL_MS * 1000);
    fd = connect_server(socket_path);
  }
  if (fd < 0) {
    free(req.data);
    return 0;
  }
  struct timeval timeout = {REPLY_TIMEOUT_S, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  unsigned char answered = 0;
  uint32_t code = 0, out_len = 0, err_len = 0;
  char *out = NULL, *err = NULL;
  int ok = write_all(fd, req.data, req.len) == 0 && read_all(fd, &answered, 1) == 0 && answered == 1 &&
           read_u32(fd, &code) == 0 && (out = read_blob(fd, &out_len)) != NULL &&
           (err = read_blob(fd, &err_len)) != NULL;
  free(req.data);
  close(fd);
  if (ok) {
    /* Only a complete answer is passed on: a half-read one would be printed twice. */
    write_all(1, out, out_len);
    write_all(2, err, err_len);
    *status = (int)(code & 0xff);
  }
  free(out);
  free(err);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: tileir-client SOCKET PROGRAM [ARGS...]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN); /* a server that went away is a write error, not a death */
  const char *no_server = getenv("TILEIRAS_NO_SERVER");
  int status = 0;
  if (!(no_server && *no_server && strcmp(no_server, "0") != 0)) {
    if (ask_server(argv[1], argc - 2, argv + 2, &status)) return status;
    setenv("TILEIRAS_SERVER_SOCKET", argv[1], 1);
  }
  signal(SIGPIPE, SIG_DFL);
  execvp(argv[2], argv + 2);
  fprintf(stderr, "tileir-client: cannot run '%s': %s\n", argv[2], strerror(errno));
  return 127;
}
