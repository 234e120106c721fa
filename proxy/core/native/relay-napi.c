/*
 * The addon's JavaScript interface (Node-API): createContext, attach, handBack, close, status,
 * dispose (and the test build's entry points), and the lifetime of contexts and pairs.
 */
#include "relay.h"

static void context_unref(context_t *ctx);

/* ---- lifetime ---------------------------------------------------------------------------------- */

void pair_unref(pair_t *p) {
  if (--p->refs > 0) return;
  context_t *ctx = p->ctx;
  if (p->prev) p->prev->next = p->next;
  else ctx->first = p->next;
  if (p->next) p->next->prev = p->prev;
  free(p->pend);
  free(p->client.left);
  free(p->broker.left);
  free(p->resp_whole);
  free(p->fetch_tail);
  free(p);
  ctx->pairs--;
  context_unref(ctx);
}

static void let_go_of_js(context_t *ctx) {
  if (ctx->disposed) return;
  ctx->disposed = 1;
  napi_env env = ctx->env;
  /* Letting go cannot be undone nor retried: a failure leaves the reference to the teardown. */
  (void)napi_delete_reference(env, ctx->on_handback);
  (void)napi_delete_reference(env, ctx->on_closed);
  (void)napi_delete_reference(env, ctx->on_stats);
  (void)napi_delete_reference(env, ctx->stats_ref);
  (void)napi_delete_reference(env, ctx->on_reserve);
  if (ctx->on_fetch_tail != NULL) (void)napi_delete_reference(env, ctx->on_fetch_tail);
  (void)napi_async_destroy(env, ctx->async);
}

static void context_unref(context_t *ctx) {
  if (!ctx->released || ctx->pairs > 0) return;
  let_go_of_js(ctx);
  cleanup_done(ctx);
  free(ctx);
}

/* The teardown hook is done with (every handle closed), or not needed (the context is freed). */
void cleanup_done(context_t *ctx) {
  if (ctx->cleanup == NULL) return;
  (void)napi_remove_async_cleanup_hook(ctx->cleanup);
  ctx->cleanup = NULL;
}

/*
 * The environment is being torn down (process exit, a worker's end) with pairs maybe still
 * relaying: their handles are closed (Node waits for that until cleanup_done), nothing is
 * reported, the statistics array (soon freed) is not written. The memory goes with the
 * finalizers of the pairs' and the context's externals, which the teardown runs.
 */
static void on_env_teardown(napi_async_cleanup_hook_handle handle, void *arg) {
  (void)handle;
  context_t *ctx = arg;
  ctx->env_gone = 1;
  ctx->disposed = 1;
  for (pair_t *p = ctx->first; p != NULL; p = p->next) {
    if (p->state == DONE) continue;
    p->state = DONE;
    close_sides(p);
  }
  if (ctx->open_handles == 0) cleanup_done(ctx);
}

static void finalize_context(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  context_t *ctx = data;
  ctx->released = 1;
  context_unref(ctx);
}

static void finalize_pair(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  pair_t *p = data;
  /* JavaScript let go without closing: nothing more is reported. */
  if (p->state != DONE) {
    p->state = DONE;
    close_sides(p);
  }
  pair_unref(p);
}

/* ---- the JavaScript interface ------------------------------------------------------------------ */

/*
 * The externals handed to JavaScript carry these tags (Node-API 8): an object that is not the one
 * this file made, a pair passed as a context or the other way round, is refused with a TypeError,
 * never dereferenced.
 */
static const napi_type_tag CONTEXT_TAG = {0x6b6f702d72656c61ULL, 0x79636f6e74657874ULL};
static const napi_type_tag PAIR_TAG = {0x6b6f702d72656c61ULL, 0x7970616972000001ULL};

/* The data of an external made here with `tag`, or NULL with a TypeError thrown. */
static void *tagged(napi_env env, napi_value v, const napi_type_tag *tag, const char *expected) {
  bool ok = false;
  void *data = NULL;
  if (napi_check_object_type_tag(env, v, tag, &ok) != napi_ok || !ok || napi_get_value_external(env, v, &data) != napi_ok) {
    napi_throw_type_error(env, "KOP_NATIVE_RELAY", expected);
    return NULL;
  }
  return data;
}

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    if ((call) != napi_ok) {                                                                          \
      napi_throw_error(env, "KOP_NATIVE_RELAY", "native relay: " #call " failed");                  \
      return NULL;                                                                                    \
    }                                                                                                 \
  } while (0)

/*
 * The first `n` arguments of a call, into argv; false, with an exception thrown, when the call
 * cannot be read or passed fewer (then a TypeError saying `what`, with `code`).
 */
static bool args_of(napi_env env, napi_callback_info info, size_t n, napi_value *argv, const char *code, const char *what) {
  size_t argc = n;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) {
    napi_throw_error(env, "KOP_NATIVE_RELAY", "native relay: napi_get_cb_info failed");
    return false;
  }
  if (argc < n) {
    napi_throw_type_error(env, code, what);
    return false;
  }
  return true;
}

/* Lets go of what create_context made before it failed (the references are deleted if made). */
static void context_abandon(context_t *ctx) {
  napi_env env = ctx->env;
  napi_ref refs[6] = {ctx->on_handback, ctx->on_closed, ctx->on_stats, ctx->stats_ref, ctx->on_reserve, ctx->on_fetch_tail};
  for (int i = 0; i < 6; i++)
    if (refs[i] != NULL) (void)napi_delete_reference(env, refs[i]);
  if (ctx->async != NULL) (void)napi_async_destroy(env, ctx->async);
  cleanup_done(ctx);
  free(ctx);
}

/* In create_context, once ctx is allocated: on failure, throw, free what was made, return. */
#define CHECK_CTX(call)                                                                               \
  do {                                                                                                \
    if ((call) != napi_ok) {                                                                          \
      napi_throw_error(env, "KOP_NATIVE_RELAY", "native relay: " #call " failed");                  \
      context_abandon(ctx);                                                                           \
      return NULL;                                                                                    \
    }                                                                                                 \
  } while (0)

/*
 * createContext(plans: Uint8Array(MAX_API * MAX_VERSION), maxFrameSize, maxInFlight, nowMs,
 *   onHandback, onClosed, onStats, stats: Float64Array, streamLimit, onReserve, onFetchTail) -> context
 * onFetchTail answering anything but a Buffer of the section's length ends the pair (CLOSED_BAD_ANSWER).
 */
static napi_value create_context(napi_env env, napi_callback_info info) {
  napi_value argv[11];
  if (!args_of(env, info, 11, argv, NULL, "createContext: 11 arguments expected")) return NULL;
  napi_typedarray_type type;
  size_t len;
  void *data;
  CHECK(napi_get_typedarray_info(env, argv[0], &type, &len, &data, NULL, NULL));
  if (type != napi_uint8_array || len != MAX_API * MAX_VERSION) {
    napi_throw_type_error(env, NULL, "createContext: plans must be a Uint8Array of 4096");
    return NULL;
  }
  napi_typedarray_type stats_type;
  size_t stats_len;
  void *stats;
  CHECK(napi_get_typedarray_info(env, argv[7], &stats_type, &stats_len, &stats, NULL, NULL));
  if (stats_type != napi_float64_array || stats_len < STATS_HEADER + 3 * STATS_SAMPLES) {
    napi_throw_type_error(env, NULL, "createContext: stats must be a Float64Array of 12296");
    return NULL;
  }
  context_t *ctx = calloc(1, sizeof(context_t));
  if (!ctx) {
    napi_throw_error(env, NULL, "createContext: out of memory");
    return NULL;
  }
  ctx->env = env;
  memcpy(ctx->plans, data, sizeof ctx->plans);
  ctx->stats = stats;
  uint32_t in_flight;
  double js_now;
  CHECK_CTX(napi_get_value_int32(env, argv[1], &ctx->max_frame_size));
  CHECK_CTX(napi_get_value_int32(env, argv[8], &ctx->stream_limit));
  CHECK_CTX(napi_get_value_uint32(env, argv[2], &in_flight));
  CHECK_CTX(napi_get_value_double(env, argv[3], &js_now));
  ctx->max_in_flight = in_flight;
  ctx->clock_offset_ms = js_now - (double)uv_hrtime() / 1e6;
  CHECK_CTX(napi_create_reference(env, argv[4], 1, &ctx->on_handback));
  CHECK_CTX(napi_create_reference(env, argv[5], 1, &ctx->on_closed));
  CHECK_CTX(napi_create_reference(env, argv[6], 1, &ctx->on_stats));
  CHECK_CTX(napi_create_reference(env, argv[7], 1, &ctx->stats_ref));
  CHECK_CTX(napi_create_reference(env, argv[9], 1, &ctx->on_reserve));
  CHECK_CTX(napi_create_reference(env, argv[10], 1, &ctx->on_fetch_tail));
  napi_value name;
  CHECK_CTX(napi_create_string_utf8(env, "kop.nativeRelay", NAPI_AUTO_LENGTH, &name));
  CHECK_CTX(napi_async_init(env, NULL, name, &ctx->async));
  CHECK_CTX(napi_add_async_cleanup_hook(env, on_env_teardown, ctx, &ctx->cleanup));
  napi_value out;
  CHECK_CTX(napi_create_external(env, ctx, finalize_context, NULL, &out));
  /* From here the external owns ctx: its finalizer frees it, whatever happens next. */
  CHECK(napi_type_tag_object(env, out, &CONTEXT_TAG));
  return out;
}

static int open_side(pair_t *p, side_t *s, int fd, int is_client) {
  s->pair = p;
  s->is_client = is_client;
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(p->ctx->env, &loop) != napi_ok) return UV_EINVAL;
  int r = uv_tcp_init(loop, &s->tcp);
  if (r < 0) return r;
  s->open = 1;
  p->refs++;
  p->ctx->open_handles++;
  int copy = dup(fd);
  if (copy < 0) return uv_translate_sys_error(errno);
  r = uv_tcp_open(&s->tcp, copy);
  if (r < 0) close(copy);
  return r;
}

/*
 * attach(context, id, clientFd, brokerFd, pending: Float64Array of (correlation id, api key,
 *   version, plan, started ms) per request awaiting its answer, oldest first) -> pair
 * Throws when the sockets cannot be taken; nothing was read then.
 */
static napi_value attach(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (!args_of(env, info, 5, argv, NULL, "attach: 5 arguments expected")) return NULL;
  context_t *ctx = tagged(env, argv[0], &CONTEXT_TAG, "attach: a native relay context expected");
  if (ctx == NULL) return NULL;
  if (ctx->disposed) {
    napi_throw_error(env, "KOP_NATIVE_RELAY", "attach: the context is disposed");
    return NULL;
  }
  int32_t id, client_fd, broker_fd;
  CHECK(napi_get_value_int32(env, argv[1], &id));
  CHECK(napi_get_value_int32(env, argv[2], &client_fd));
  CHECK(napi_get_value_int32(env, argv[3], &broker_fd));
  napi_typedarray_type type;
  size_t len;
  void *data;
  CHECK(napi_get_typedarray_info(env, argv[4], &type, &len, &data, NULL, NULL));
  if (type != napi_float64_array || len % 5 != 0) {
    napi_throw_type_error(env, NULL, "attach: pending must be a Float64Array of 5 numbers per request");
    return NULL;
  }
  pair_t *p = calloc(1, sizeof(pair_t));
  if (!p) {
    napi_throw_error(env, NULL, "attach: out of memory");
    return NULL;
  }
  p->ctx = ctx;
  p->id = id;
  p->state = ENGAGED;
  p->refs = 1; /* JavaScript's */
  p->last_active_ns = uv_hrtime();
  ctx->pairs++;
  p->next = ctx->first;
  if (p->next) p->next->prev = p;
  ctx->first = p;
  const double *d = data;
  int ok = 1;
  for (size_t i = 0; i < len / 5 && ok; i++) {
    pending_t e = {(int32_t)d[5 * i], (int16_t)d[5 * i + 1], (int16_t)d[5 * i + 2], (uint8_t)d[5 * i + 3], d[5 * i + 4]};
    ok = pend_push(p, e);
  }
  int r = ok ? open_side(p, &p->client, client_fd, 1) : UV_ENOMEM;
  if (r >= 0) r = open_side(p, &p->broker, broker_fd, 0);
  if (r >= 0) {
    update_reading(p);
    if (p->state == DONE) r = UV_EIO;
  }
  if (r < 0) {
    p->state = DONE;
    close_sides(p);
    pair_unref(p);
    napi_throw_error(env, uv_err_name(r), "attach: the sockets could not be taken");
    return NULL;
  }
  napi_value out;
  if (napi_create_external(env, p, finalize_pair, NULL, &out) != napi_ok) {
    p->state = DONE;
    close_sides(p);
    pair_unref(p);
    napi_throw_error(env, "KOP_NATIVE_RELAY", "attach: napi_create_external failed");
    return NULL;
  }
  if (napi_type_tag_object(env, out, &PAIR_TAG) != napi_ok) {
    /* The external's finalizer lets go of the pair; it must not relay unowned meanwhile. */
    p->state = DONE;
    close_sides(p);
    napi_throw_error(env, "KOP_NATIVE_RELAY", "attach: napi_type_tag_object failed");
    return NULL;
  }
  return out;
}

static pair_t *pair_arg(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!args_of(env, info, 1, argv, "KOP_NATIVE_RELAY", "a native relay pair expected")) return NULL;
  return tagged(env, argv[0], &PAIR_TAG, "a native relay pair expected");
}

/* handBack(pair): stop at the next frame boundaries and call onHandback (later, or from here). */
static napi_value hand_back(napi_env env, napi_callback_info info) {
  pair_t *p = pair_arg(env, info);
  if (p) start_handback(p);
  return NULL;
}

/* close(pair): stop now, nothing more is reported; queued writes are dropped. */
static napi_value close_pair(napi_env env, napi_callback_info info) {
  pair_t *p = pair_arg(env, info);
  if (p && p->state != DONE) {
    p->state = DONE;
    close_sides(p);
  }
  return NULL;
}

/*
 * dispose(context): lets go of the callbacks and the statistics array (which refer back to the
 * JavaScript object that holds the context: without this, neither could ever be collected).
 * Pairs still attached are relayed on, and report nothing more.
 */
static napi_value dispose(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!args_of(env, info, 1, argv, "KOP_NATIVE_RELAY", "dispose: a native relay context expected")) return NULL;
  context_t *ctx = tagged(env, argv[0], &CONTEXT_TAG, "dispose: a native relay context expected");
  if (ctx != NULL) let_go_of_js(ctx);
  return NULL;
}

/* status(pair) -> [ms since the client's last read or write, requests awaiting, bytes unsent to the client] */
static napi_value status(napi_env env, napi_callback_info info) {
  pair_t *p = pair_arg(env, info);
  if (!p) return NULL;
  napi_value arr, v;
  CHECK(napi_create_array_with_length(env, 3, &arr));
  CHECK(napi_create_double(env, (double)(uv_hrtime() - p->last_active_ns) / 1e6, &v));
  CHECK(napi_set_element(env, arr, 0, v));
  CHECK(napi_create_uint32(env, p->pend_count, &v));
  CHECK(napi_set_element(env, arr, 1, v));
  CHECK(napi_create_double(env, (double)p->client.queued, &v));
  CHECK(napi_set_element(env, arr, 2, v));
  return arr;
}

#ifdef RELAY_TESTING_BUILD
/*
 * Only in the test build (scripts/build-native.mjs --testing, -DRELAY_TESTING_BUILD), for the tests
 * that hold these against the JavaScript walkers (produce-endpoints.ts, frames.ts
 * peekProduceAcks): produceAnswerUnchanged(payload, version) -> boolean,
 * produceAcks(payload, version, flexible) -> acks, -2 (more bytes needed) or -3 (unreadable);
 * and failNextHandback, for the path a Node-API failure takes.
 */
static napi_value test_produce_answer_unchanged(napi_env env, napi_callback_info info) {
  napi_value argv[2], out;
  void *data;
  size_t len;
  int32_t version;
  if (!args_of(env, info, 2, argv, "KOP_NATIVE_RELAY", "produceAnswerUnchanged: 2 arguments expected")) return NULL;
  CHECK(napi_get_buffer_info(env, argv[0], &data, &len));
  CHECK(napi_get_value_int32(env, argv[1], &version));
  CHECK(napi_get_boolean(env, produce_answer_unchanged(data, len, (int16_t)version), &out));
  return out;
}

static napi_value test_produce_acks(napi_env env, napi_callback_info info) {
  napi_value argv[3], out;
  void *data;
  size_t len;
  int32_t version;
  bool flexible;
  if (!args_of(env, info, 3, argv, "KOP_NATIVE_RELAY", "produceAcks: 3 arguments expected")) return NULL;
  CHECK(napi_get_buffer_info(env, argv[0], &data, &len));
  CHECK(napi_get_value_int32(env, argv[1], &version));
  CHECK(napi_get_value_bool(env, argv[2], &flexible));
  if (len < 8) return NULL;
  CHECK(napi_create_int32(env, produce_acks(data, len, (int16_t)version, flexible), &out));
  return out;
}

/*
 * fetchWalk(payload, cut) -> where the Fetch answer's top-level tagged fields start in `payload`
 * (the answer after its size prefix), walked in two pieces cut at `cut`; -1 when the walk finds
 * it malformed, -2 when it ends before them. fetchTailUnchanged(section) -> boolean.
 */
static napi_value test_fetch_walk(napi_env env, napi_callback_info info) {
  napi_value argv[2], out;
  void *data;
  size_t len;
  uint32_t cut;
  if (!args_of(env, info, 2, argv, "KOP_NATIVE_RELAY", "fetchWalk: 2 arguments expected")) return NULL;
  CHECK(napi_get_buffer_info(env, argv[0], &data, &len));
  CHECK(napi_get_value_uint32(env, argv[1], &cut));
  if (cut > len) cut = (uint32_t)len;
  fetch_walk_t w;
  int status = fetch_walk_start(&w, (int64_t)len);
  size_t safe = 0;
  if (status != FW_BAD) safe = fetch_walk_feed(&w, data, cut, &status);
  if (status == FW_GO && cut < len) safe += fetch_walk_feed(&w, (const uint8_t *)data + cut, len - cut, &status);
  double result = status == FW_BAD ? -1 : status == FW_GO ? -2 : (double)safe;
  CHECK(napi_create_double(env, result, &out));
  return out;
}

static napi_value test_fetch_tail_unchanged(napi_env env, napi_callback_info info) {
  napi_value argv[1], out;
  void *data;
  size_t len;
  if (!args_of(env, info, 1, argv, "KOP_NATIVE_RELAY", "fetchTailUnchanged: a Buffer expected")) return NULL;
  CHECK(napi_get_buffer_info(env, argv[0], &data, &len));
  CHECK(napi_get_boolean(env, fetch_tail_unchanged(data, len), &out));
  return out;
}

/* failNextHandback(context): the next handback of the context fails as a Node-API call would. */
static napi_value test_fail_next_handback(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!args_of(env, info, 1, argv, "KOP_NATIVE_RELAY", "failNextHandback: a native relay context expected")) return NULL;
  context_t *ctx = tagged(env, argv[0], &CONTEXT_TAG, "a native relay context expected");
  if (ctx != NULL) ctx->fail_next_handback = 1;
  return NULL;
}
#endif

/* A string argument copied into `buf` (truncated to its size); 0 when it is not a string. */
static int string_arg(napi_env env, napi_callback_info info, char *buf, size_t size) {
  size_t argc = 1;
  napi_value argv[1];
  size_t len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return 0;
  return napi_get_value_string_utf8(env, argv[0], buf, size, &len) == napi_ok;
}

/* routeCStderr(fields): C's stderr stream as JSON log lines with `fields` (c-stderr.c); a boolean. */
static napi_value route_c_stderr_js(napi_env env, napi_callback_info info) {
  char fields[512];
  napi_value out;
  int done = string_arg(env, info, fields, sizeof fields) && route_c_stderr(fields);
  CHECK(napi_get_boolean(env, done, &out));
  return out;
}

#ifdef RELAY_TESTING_BUILD
/* printToCStderr(text): fprintf(stderr, "%s", text), as LMDB prints its write errors. */
static napi_value test_print_to_c_stderr(napi_env env, napi_callback_info info) {
  char text[8192];
  if (string_arg(env, info, text, sizeof text)) print_to_c_stderr(text);
  return NULL;
}
#endif

/* The module's exports; a failure here fails the require() with the exception thrown. */
static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"createContext", NULL, create_context, NULL, NULL, NULL, napi_default, NULL},
      {"attach", NULL, attach, NULL, NULL, NULL, napi_default, NULL},
      {"handBack", NULL, hand_back, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, close_pair, NULL, NULL, NULL, napi_default, NULL},
      {"status", NULL, status, NULL, NULL, NULL, napi_default, NULL},
      {"dispose", NULL, dispose, NULL, NULL, NULL, napi_default, NULL},
      {"routeCStderr", NULL, route_c_stderr_js, NULL, NULL, NULL, napi_default, NULL},
#ifdef RELAY_TESTING_BUILD
      {"printToCStderr", NULL, test_print_to_c_stderr, NULL, NULL, NULL, napi_default, NULL},
      {"produceAnswerUnchanged", NULL, test_produce_answer_unchanged, NULL, NULL, NULL, napi_default, NULL},
      {"produceAcks", NULL, test_produce_acks, NULL, NULL, NULL, napi_default, NULL},
      {"failNextHandback", NULL, test_fail_next_handback, NULL, NULL, NULL, napi_default, NULL},
      {"fetchWalk", NULL, test_fetch_walk, NULL, NULL, NULL, napi_default, NULL},
      {"fetchTailUnchanged", NULL, test_fetch_tail_unchanged, NULL, NULL, NULL, napi_default, NULL},
#endif
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  const struct {
    const char *name;
    uint32_t value;
  } constants[] = {{"maxApi", MAX_API}, {"maxVersion", MAX_VERSION}, {"statsHeader", STATS_HEADER}, {"statsSamples", STATS_SAMPLES}};
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
    napi_value v;
    CHECK(napi_create_uint32(env, constants[i].value, &v));
    CHECK(napi_set_named_property(env, exports, constants[i].name, v));
  }
  return exports;
}

NAPI_MODULE_INIT() { return init(env, exports); }
