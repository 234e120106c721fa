# kafka-offset-proxy: multi-stage build on node:20-slim, runs as the unprivileged `node` user.
#
#   docker build -t kafka-offset-proxy .
#   docker run --rm -p 19092-19100:19092-19100 -p 127.0.0.1:9464:9464 \
#     -e KOP_BOOTSTRAP_SERVER=kafka:9092 -e KOP_ADVERTISED_HOST=localhost \
#     -e KOP_HTTP_TOKEN="$(openssl rand -hex 24)" kafka-offset-proxy
#
# Every option is also an environment variable (docs/configuration.md).

FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY protocol ./protocol
COPY backends ./backends
COPY proxy ./proxy
COPY scripts/build-native.mjs ./scripts/
# `npm ci` runs the prepare script, which compiles to dist/: the TypeScript, and the native relay
# addon (dist/native/kop-relay.node) with gcc and the headers the node image ships. lmdb ships
# prebuilt binaries for glibc x64/arm64. `--require`: an image without the addon is an error here.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
RUN npm ci --no-audit --no-fund \
 && node scripts/build-native.mjs --require \
 && npm prune --omit=dev --no-audit --no-fund \
 && npm cache clean --force

FROM node:20-slim
# KOP_HTTP is on for the HEALTHCHECK; without KOP_HTTP_TOKEN its admin API refuses every offset
# change (403). Give one (at least 16 bytes, no placeholder) to change offsets over HTTP:
#   docker run -e KOP_HTTP_TOKEN="$(openssl rand -hex 24)" ...
ENV NODE_ENV=production \
    KOP_LISTEN=0.0.0.0:19092 \
    KOP_HTTP=0.0.0.0:9464 \
    KOP_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/protocol/spec ./protocol/spec
COPY NOTICE ./
# The embedded store's directory must be writable by the runtime user.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
# 19092: bootstrap listener; broker N is served on 19092 + 1 + N. 9464: metrics and health.
EXPOSE 19092-19100 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9464/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "/app/bin/kafka-offset-proxy.js"]
