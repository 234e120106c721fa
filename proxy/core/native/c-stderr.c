/*
 * C code in the process (LMDB's "Write error: ..." on a full disk, written with fprintf(stderr)
 * and no newline; Node's and V8's fatal-error messages) prints through the C library's `stderr`
 * stream, bypassing JavaScript. route_c_stderr replaces that stream with one whose every write
 * becomes one JSON line of the proxy's log, written at once and synchronously to file descriptor
 * 2: nothing is buffered in the process, so a message printed just before a crash is not lost
 * (the alternative, a pipe read by a thread or a process, loses it or must outlive the process).
 * glibc and musl (fopencookie) only; elsewhere the stream is left as it is.
 */
#include "relay.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
/* The fields after "time" up to "text" (from JavaScript: level, event, service...), as JSON. */
static char fields[512];

/* Writes all of `len` bytes to fd 2, waiting while a non-blocking pipe is full. */
static void write_all(const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(2, buf, len);
    if (n > 0) {
      buf += n;
      len -= (size_t)n;
    } else if (n < 0 && errno == EAGAIN) {
      struct pollfd p = {.fd = 2, .events = POLLOUT};
      (void)poll(&p, 1, 1000);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return; /* fd 2 gone: nowhere to say anything */
    }
  }
}

/* One write of the C stream: one JSON line, the text escaped, a trailing newline dropped. */
static ssize_t json_line(void *cookie, const char *text, size_t size) {
  (void)cookie;
  char head[640];
  char out[4096];
  struct timespec now;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &now);
  gmtime_r(&now.tv_sec, &tm);
  size_t stamp = strftime(head, sizeof head, "{\"time\":\"%Y-%m-%dT%H:%M:%S", &tm);
  int rest = snprintf(head + stamp, sizeof head - stamp, ".%03ldZ\",%s\"text\":\"", now.tv_nsec / 1000000, fields);
  size_t head_len = stamp + (rest > 0 ? (size_t)rest : 0);
  memcpy(out, head, head_len);
  size_t at = head_len;
  size_t end = size;
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) end--;
  for (size_t i = 0; i < end; i++) {
    if (at > sizeof out - 16) { /* a long text goes out in several lines, none lost */
      memcpy(out + at, "\"}\n", 3);
      write_all(out, at + 3);
      memcpy(out, head, head_len);
      at = head_len;
    }
    unsigned char c = (unsigned char)text[i];
    if (c == '"' || c == '\\') {
      out[at++] = '\\';
      out[at++] = (char)c;
    } else if (c < 0x20) {
      at += (size_t)snprintf(out + at, sizeof out - at, "\\u%04x", c);
    } else {
      out[at++] = (char)c;
    }
  }
  memcpy(out + at, "\"}\n", 3);
  write_all(out, at + 3);
  return (ssize_t)size;
}

int route_c_stderr(const char *json_fields) {
  size_t len = strlen(json_fields);
  if (len >= sizeof fields) return 0;
  memcpy(fields, json_fields, len + 1);
  cookie_io_functions_t io = {.read = NULL, .write = json_line, .seek = NULL, .close = NULL};
  FILE *stream = fopencookie(NULL, "w", io);
  if (stream == NULL) return 0;
  /* Unbuffered: each fprintf reaches json_line at once, as one write. */
  setvbuf(stream, NULL, _IONBF, 0);
  fflush(stderr);
  stderr = stream;
  return 1;
}
#else
int route_c_stderr(const char *json_fields) {
  (void)json_fields;
  return 0;
}
#endif

#ifdef RELAY_TESTING_BUILD
void print_to_c_stderr(const char *text) { fprintf(stderr, "%s", text); }
#endif
