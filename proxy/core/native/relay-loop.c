/*
 * The relay loop: both sockets of a pair read on Node's event loop, each request frame classified
 * and passed on to the broker as its bytes arrive, each answer passed back in order, every write
 * at once where the kernel takes it, and a side read only while its peer's socket takes what it
 * is given. See relay.h for the whole addon.
 */
#include "relay.h"

/* ---- the queue of requests awaiting answers -------------------------------------------------- */

int pend_push(pair_t *p, pending_t e) {
  if (p->pend_count == p->pend_cap) {
    uint32_t cap = p->pend_cap ? p->pend_cap * 2 : 16;
    pending_t *grown = malloc(sizeof(pending_t) * cap);
    if (!grown) return 0;
    for (uint32_t i = 0; i < p->pend_count; i++) grown[i] = p->pend[(p->pend_first + i) % p->pend_cap];
    free(p->pend);
    p->pend = grown;
    p->pend_cap = cap;
    p->pend_first = 0;
  }
  p->pend[(p->pend_first + p->pend_count) % p->pend_cap] = e;
  p->pend_count++;
  return 1;
}

static pending_t *pend_head(pair_t *p) { return p->pend_count ? &p->pend[p->pend_first] : NULL; }

static void pend_pop(pair_t *p) {
  p->pend_first = (p->pend_first + 1) % p->pend_cap;
  p->pend_count--;
}

/* ---- writes ---------------------------------------------------------------------------------- */

typedef struct {
  uv_write_t req;
  side_t *to;
  size_t len;
  uint8_t bytes[];
} write_req_t;

static void on_written(uv_write_t *req, int status) {
  write_req_t *w = (write_req_t *)req;
  side_t *to = w->to;
  pair_t *p = to->pair;
  to->queued -= w->len;
  free(w);
  if (status < 0) {
    if (status != UV_ECANCELED) stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, status);
    return;
  }
  if (to->is_client) p->last_active_ns = uv_hrtime();
  update_reading(p);
  maybe_handed_back(p);
}

/*
 * Writes the pieces to `to`: at once where the kernel takes them, the rest copied and queued (in
 * order behind anything queued before). 0 on a write error (the pair is stopped).
 */
static int send_pieces(side_t *to, uv_buf_t *pieces, unsigned n) {
  pair_t *p = to->pair;
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += pieces[i].len;
  if (total == 0) return 1;
  count_bytes(p->ctx, to->is_client ? 2 : 4, (double)total);
  size_t done = 0;
  if (to->queued == 0) {
    int r = uv_try_write((uv_stream_t *)&to->tcp, pieces, n);
    if (r >= 0) done = (size_t)r;
    else if (r != UV_EAGAIN) {
      stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, r);
      return 0;
    }
    if (to->is_client && done > 0) p->last_active_ns = uv_hrtime();
    if (done == total) return 1;
  }
  size_t rest = total - done;
  write_req_t *w = malloc(sizeof(write_req_t) + rest);
  if (!w) {
    stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, UV_ENOMEM);
    return 0;
  }
  size_t at = 0, skipped = 0;
  for (unsigned i = 0; i < n; i++) {
    size_t len = pieces[i].len, from = 0;
    if (skipped < done) {
      size_t s = done - skipped < len ? done - skipped : len;
      skipped += s;
      from = s;
    }
    memcpy(w->bytes + at, pieces[i].base + from, len - from);
    at += len - from;
  }
  w->to = to;
  w->len = rest;
  to->queued += rest;
  uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)rest);
  int r = uv_write(&w->req, (uv_stream_t *)&to->tcp, &b, 1, on_written);
  if (r < 0) {
    to->queued -= rest;
    free(w);
    stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, r);
    return 0;
  }
  return 1;
}

/* Pieces of one read to write on, gathered so that they go in one system call. */
#define MAX_PIECES 64
typedef struct {
  uv_buf_t b[MAX_PIECES];
  unsigned n;
} pieces_t;

static int add_piece(side_t *to, pieces_t *out, const uint8_t *base, size_t len) {
  if (len == 0) return 1;
  if (out->n > 0) {
    uv_buf_t *last = &out->b[out->n - 1];
    if ((const uint8_t *)last->base + last->len == base) {
      last->len += len;
      return 1;
    }
  }
  if (out->n == MAX_PIECES) {
    if (!send_pieces(to, out->b, out->n)) return 0;
    out->n = 0;
  }
  out->b[out->n++] = uv_buf_init((char *)base, (unsigned)len);
  return 1;
}


/* ---- flow -------------------------------------------------------------------------------------- */

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  context_t *ctx = ((side_t *)h)->pair->ctx;
  buf->base = (char *)ctx->read_buffer;
  buf->len = READ_BYTES;
}

/*
 * Reads a side while the other side's socket takes what it is given (nothing queued for it), the
 * client only while fewer than --max-in-flight requests await answers; a stopped side not at all.
 */
void update_reading(pair_t *p) {
  if (p->state == DONE) return;
  int client = !p->client.stopped && p->broker.queued == 0 && p->pend_count < p->ctx->max_in_flight;
  int broker = !p->broker.stopped && p->client.queued == 0;
  side_t *sides[2] = {&p->client, &p->broker};
  int want[2] = {client, broker};
  for (int i = 0; i < 2; i++) {
    side_t *s = sides[i];
    if (want[i] == s->reading) continue;
    int r = want[i] ? uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read) : uv_read_stop((uv_stream_t *)&s->tcp);
    if (r < 0) {
      stop_with(p, s->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, r);
      return;
    }
    s->reading = want[i];
  }
}

/* ---- client -> broker -------------------------------------------------------------------------- */

static int64_t classify(pair_t *p, const uint8_t *h, size_t len, pending_t *e) {
  return classify_request(p->ctx->plans, p->ctx->max_frame_size, h, len, e);
}

/* Takes a classified frame: its answer awaited (unless it gets none), its bytes passed on. */
static int take_request(pair_t *p, const pending_t *e) {
  if (e->plan == 0) return 1;
  pending_t entry = *e;
  entry.started_ms = now_ms(p->ctx);
  return pend_push(p, entry);
}

static void client_read(pair_t *p, const uint8_t *data, size_t n) {
  pieces_t out = {.n = 0};
  side_t *broker = &p->broker;
  size_t off = 0;
  while (off < n) {
    if (p->req_left > 0) {
      size_t k = (uint64_t)p->req_left < n - off ? (size_t)p->req_left : n - off;
      if (!add_piece(broker, &out, data + off, k)) return;
      off += k;
      p->req_left -= (int64_t)k;
      if (p->req_left == 0) release_request(p);
      continue;
    }
    if (p->state != ENGAGED) {
      if (!send_pieces(broker, out.b, out.n)) return;
      stop_side(&p->client, p->req_head, p->req_head_len, data + off, n - off);
      p->req_head_len = 0;
      return;
    }
    pending_t e;
    int64_t total;
    if (p->req_head_len == 0) {
      total = classify(p, data + off, n - off, &e);
      /* A large request that spans reads: passed on as it arrives, with its reservation. */
      if (total > p->ctx->stream_limit && total > (int64_t)(n - off) && !reserve_request(p, total)) total = HEAD_JS;
      if (total == HEAD_MORE) {
        if (n - off <= HEAD_MAX) {
          memcpy(p->req_head, data + off, n - off);
          p->req_head_len = n - off;
          off = n;
          break;
        }
        total = HEAD_JS;
      }
      if (total == HEAD_JS) {
        if (!send_pieces(broker, out.b, out.n)) return;
        stop_side(&p->client, NULL, 0, data + off, n - off);
        return;
      }
      if (!take_request(p, &e)) {
        stop_with(p, CLOSED_CLIENT_ERROR, UV_ENOMEM);
        return;
      }
      p->req_left = total;
      continue;
    }
    /* A frame's start held from earlier reads: add to it what classifying needs. */
    size_t room = HEAD_MAX - p->req_head_len;
    if (p->req_head_len >= 4) {
      int32_t size = be32(p->req_head);
      if (size >= 0) {
        int64_t total_known = 4 + (int64_t)size;
        if ((int64_t)p->req_head_len + (int64_t)room > total_known) room = (size_t)(total_known - (int64_t)p->req_head_len);
      }
    } else if (room > 4 - p->req_head_len) {
      room = 4 - p->req_head_len; /* the size prefix first, to know where the frame ends */
    }
    size_t k = room < n - off ? room : n - off;
    memcpy(p->req_head + p->req_head_len, data + off, k);
    p->req_head_len += k;
    off += k;
    total = classify(p, p->req_head, p->req_head_len, &e);
    if (total == HEAD_MORE && p->req_head_len >= HEAD_MAX) total = HEAD_JS;
    /* It spans reads: a large one is passed on with its reservation, or is JavaScript's. */
    if (total > p->ctx->stream_limit && !reserve_request(p, total)) total = HEAD_JS;
    if (total == HEAD_MORE) continue;
    if (total == HEAD_JS) {
      if (!send_pieces(broker, out.b, out.n)) return;
      stop_side(&p->client, p->req_head, p->req_head_len, data + off, n - off);
      p->req_head_len = 0;
      return;
    }
    if (!take_request(p, &e)) {
      stop_with(p, CLOSED_CLIENT_ERROR, UV_ENOMEM);
      return;
    }
    /* The held bytes go first; they are copied if the kernel does not take them at once. */
    if (!add_piece(broker, &out, p->req_head, p->req_head_len)) return;
    p->req_left = total - (int64_t)p->req_head_len;
    p->req_head_len = 0;
    /* req_head is used again by the next frame of this read: write what refers to it now. */
    if (!send_pieces(broker, out.b, out.n)) return;
    out.n = 0;
  }
  if (!send_pieces(broker, out.b, out.n)) return;
  if (p->state != ENGAGED && p->req_left == 0 && !p->client.stopped) {
    stop_side(&p->client, p->req_head, p->req_head_len, NULL, 0);
    p->req_head_len = 0;
  }
}

/* ---- broker -> client -------------------------------------------------------------------------- */

/* The answer at the head has gone to the client whole. */
static void answer_done(pair_t *p) {
  answered(p, pend_head(p));
  pend_pop(p);
}

/*
 * Starts the answer whose first bytes are `h` (`len` >= 8 of them, size prefix included): 1 to
 * stream it, 0 when JavaScript must have it.
 */
static int answer_streams(pair_t *p, const uint8_t *h) {
  int32_t size = be32(h);
  if (size < 4 || size > p->ctx->max_frame_size) return 0;
  const pending_t *e = pend_head(p);
  if (e == NULL || be32(h + 4) != e->correlation_id) return 0;
  return 1;
}

/* A Fetch answer's walk is over, the answer malformed: the pair ends (its start has gone). */
static int fetch_bad(pair_t *p) {
  uint8_t *tail = p->fetch_tail;
  p->fetch_tail = NULL;
  free(tail);
  p->fetch_walking = 0;
  stop_with(p, CLOSED_BAD_ANSWER, 0);
  return 0;
}

/*
 * The next `k` bytes of the Fetch answer being streamed (never past its end): what precedes its
 * top-level tagged fields goes to the client, those are held. 0 when the pair stopped.
 */
static int fetch_pass(pair_t *p, pieces_t *out, const uint8_t *b, size_t k) {
  int status;
  size_t now = fetch_walk_feed(&p->fetch, b, k, &status);
  if (status == FW_BAD) return fetch_bad(p);
  if (!add_piece(&p->client, out, b, now)) return 0;
  if (now == k) return 1;
  /* The tail: its length is what the walk has left of the answer. */
  size_t size = (size_t)p->fetch.left;
  if (p->fetch_tail == NULL) {
    p->fetch_tail = size > 0 ? malloc(size) : NULL;
    if (p->fetch_tail == NULL) return fetch_bad(p);
    p->fetch_tail_len = 0;
  }
  if (k - now > size - p->fetch_tail_len) return fetch_bad(p); /* cannot be: bytes past the answer */
  memcpy(p->fetch_tail + p->fetch_tail_len, b + now, k - now);
  p->fetch_tail_len += k - now;
  return 1;
}

/*
 * The Fetch answer's last byte is in: its tail goes as written, or as JavaScript rewrites its
 * NodeEndpoints, written now (the next answer may reuse nothing of it). 0 when the pair stopped.
 */
static int fetch_done(pair_t *p, pieces_t *out, int16_t version) {
  uint8_t *tail = p->fetch_tail;
  size_t len = p->fetch_tail_len;
  if (!p->fetch.in_tail || tail == NULL || len != (size_t)p->fetch.left) return fetch_bad(p);
  if (!fetch_tail_unchanged(tail, len) && !rewrite_fetch_tail(p, tail, len, version)) return fetch_bad(p);
  p->fetch_walking = 0;
  int sent = add_piece(&p->client, out, tail, len) && send_pieces(&p->client, out->b, out->n);
  out->n = 0;
  p->fetch_tail = NULL;
  free(tail);
  return sent;
}

static void broker_read(pair_t *p, const uint8_t *data, size_t n) {
  pieces_t out = {.n = 0};
  side_t *client = &p->client;
  size_t off = 0;
  while (off < n) {
    if (p->resp_left > 0) {
      size_t k = (uint64_t)p->resp_left < n - off ? (size_t)p->resp_left : n - off;
      if (p->fetch_walking) {
        if (!fetch_pass(p, &out, data + off, k)) return;
      } else if (!add_piece(client, &out, data + off, k)) {
        return;
      }
      off += k;
      p->resp_left -= (int64_t)k;
      if (p->resp_left == 0) {
        if (p->fetch_walking && !fetch_done(p, &out, pend_head(p)->api_version)) return;
        answer_done(p);
      }
      continue;
    }
    if (p->resp_whole != NULL) {
      /* A Produce answer gathered for its walk. */
      size_t k = p->resp_whole_size - p->resp_whole_len < n - off ? p->resp_whole_size - p->resp_whole_len : n - off;
      memcpy(p->resp_whole + p->resp_whole_len, data + off, k);
      p->resp_whole_len += k;
      off += k;
      if (p->resp_whole_len < p->resp_whole_size) continue;
      uint8_t *whole = p->resp_whole;
      size_t size = p->resp_whole_size;
      if (!produce_answer_unchanged(whole + 4, size - 4, pend_head(p)->api_version)) {
        p->resp_whole = NULL;
        if (!send_pieces(client, out.b, out.n)) {
          free(whole);
          return;
        }
        stop_side(&p->broker, whole, size, data + off, n - off);
        free(whole);
        return;
      }
      if (!add_piece(client, &out, whole, size) || !send_pieces(client, out.b, out.n)) {
        p->resp_whole = NULL;
        free(whole);
        return;
      }
      out.n = 0;
      p->resp_whole = NULL;
      free(whole);
      answer_done(p);
      continue;
    }
    if (p->state != ENGAGED) {
      if (!send_pieces(client, out.b, out.n)) return;
      stop_side(&p->broker, p->resp_head, p->resp_head_len, data + off, n - off);
      p->resp_head_len = 0;
      return;
    }
    const uint8_t *h;
    if (p->resp_head_len == 0 && n - off >= 8) {
      h = data + off;
    } else {
      size_t k = 8 - p->resp_head_len < n - off ? 8 - p->resp_head_len : n - off;
      memcpy(p->resp_head + p->resp_head_len, data + off, k);
      p->resp_head_len += k;
      off += k;
      if (p->resp_head_len < 8) continue;
      h = p->resp_head;
    }
    int held = h == p->resp_head;
    if (!answer_streams(p, h)) {
      if (!send_pieces(client, out.b, out.n)) return;
      if (held) stop_side(&p->broker, p->resp_head, 8, data + off, n - off);
      else stop_side(&p->broker, NULL, 0, data + off, n - off);
      p->resp_head_len = 0;
      return;
    }
    int64_t total = 4 + (int64_t)be32(h);
    if ((pend_head(p)->plan & PLAN_KIND) == PLAN_FETCH) {
      /* The size prefix goes at once; the payload, from the correlation id on, through the walk. */
      if (fetch_walk_start(&p->fetch, total - 4) == FW_BAD) {
        fetch_bad(p);
        return;
      }
      p->fetch_walking = 1;
      if (held) {
        if (!add_piece(client, &out, p->resp_head, 4) || !fetch_pass(p, &out, p->resp_head + 4, 4) ||
            !send_pieces(client, out.b, out.n))
          return;
        out.n = 0;
        p->resp_head_len = 0;
        p->resp_left = total - 8;
        if (p->resp_left == 0) {
          if (!fetch_done(p, &out, pend_head(p)->api_version)) return;
          answer_done(p);
        }
      } else {
        if (!add_piece(client, &out, data + off, 4)) return;
        off += 4;
        p->resp_left = total - 4;
      }
      continue;
    }
    if ((pend_head(p)->plan & PLAN_KIND) == PLAN_WALK) {
      /* The walk needs the whole answer: in this read, or gathered. */
      if (!held && (int64_t)(n - off) >= total) {
        if (!produce_answer_unchanged(data + off + 4, (size_t)total - 4, pend_head(p)->api_version)) {
          if (!send_pieces(client, out.b, out.n)) return;
          stop_side(&p->broker, NULL, 0, data + off, n - off);
          return;
        }
        if (!add_piece(client, &out, data + off, (size_t)total)) return;
        off += (size_t)total;
        answer_done(p);
        continue;
      }
      p->resp_whole = malloc((size_t)total);
      if (!p->resp_whole) {
        stop_with(p, CLOSED_BROKER_ERROR, UV_ENOMEM);
        return;
      }
      p->resp_whole_size = (size_t)total;
      if (held) {
        memcpy(p->resp_whole, p->resp_head, 8);
        p->resp_whole_len = 8;
        p->resp_head_len = 0;
      } else {
        p->resp_whole_len = 0;
      }
      continue;
    }
    if (held) {
      if (!add_piece(client, &out, p->resp_head, 8) || !send_pieces(client, out.b, out.n)) return;
      out.n = 0;
      p->resp_head_len = 0;
      p->resp_left = total - 8;
      if (p->resp_left == 0) answer_done(p);
    } else {
      p->resp_left = total;
    }
  }
  if (!send_pieces(client, out.b, out.n)) return;
  if (p->state != ENGAGED && p->resp_left == 0 && p->resp_whole == NULL && !p->broker.stopped) {
    stop_side(&p->broker, p->resp_head, p->resp_head_len, NULL, 0);
    p->resp_head_len = 0;
  }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  side_t *s = (side_t *)stream;
  pair_t *p = s->pair;
  if (p->state == DONE || nread == 0) return;
  if (nread < 0) {
    if (s->is_client) stop_with(p, nread == UV_EOF ? CLOSED_CLIENT_ENDED : CLOSED_CLIENT_ERROR, (int)nread);
    else stop_with(p, nread == UV_EOF ? CLOSED_BROKER_ENDED : CLOSED_BROKER_ERROR, (int)nread);
    return;
  }
  if (s->is_client) {
    p->last_active_ns = uv_hrtime();
    count_bytes(p->ctx, 1, (double)nread);
    client_read(p, (const uint8_t *)buf->base, (size_t)nread);
  } else {
    count_bytes(p->ctx, 3, (double)nread);
    broker_read(p, (const uint8_t *)buf->base, (size_t)nread);
  }
  update_reading(p);
  maybe_handed_back(p);
}

