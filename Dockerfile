# One image for every part: `lanes api`, `lanes worker`, `lanes supervisor` or `lanes up`.
# Runs from TypeScript source through tsx (a runtime dependency), so there is no build stage to drift.
# Node 26 is the Active LTS (20 left support in April 2026; Modal's JS SDK needs 22 or newer), on
# Debian 13 "trixie", Node 26's default Debian: bookworm's support ends before Node 26's does.
FROM node:26-trixie-slim

# git: the demo agent and most real agents work on repositories. util-linux: `unshare` gives each
# local sandbox its own PID namespace where the container is allowed to (it falls back otherwise);
# `setpriv` and `prlimit` run a separate-uid sandbox as its own uid, its processes capped.
# tini: PID 1 (ENTRYPOINT below).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git util-linux ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
COPY libs/contracts/package.json libs/contracts/
COPY libs/client/package.json libs/client/
COPY libs/sandbox/package.json libs/sandbox/
COPY libs/supervision/package.json libs/supervision/
COPY libs/queue/package.json libs/queue/
COPY libs/runner/package.json libs/runner/
COPY libs/tracing/package.json libs/tracing/
COPY apps/api/package.json apps/api/
COPY apps/worker/package.json apps/worker/
COPY apps/supervisor/package.json apps/supervisor/
COPY apps/cli/package.json apps/cli/
RUN npm ci --omit=dev --no-audit --no-fund

COPY tsconfig.base.json ./
COPY libs libs
COPY apps apps

ENV NODE_ENV=production \
    LANES_SANDBOX_DIR=/var/lib/lanes/sandboxes \
    LANES_PORT=3000
# Not root: the image's unprivileged `node` user (uid 1000) owns only what lanes writes: the
# sandboxes' directory and `.lanes/` (local state); the code stays root's, read-only to it.
RUN mkdir -p /var/lib/lanes/sandboxes /app/.lanes && chown node:node /var/lib/lanes/sandboxes /app/.lanes
USER node
EXPOSE 3000
# tini is PID 1. It reaps every process re-parented to it (a sandbox's orphans, whose parent a
# kill took away), and it forwards each signal to its one child, the lanes process, then exits with
# that child's status. So `kill -TERM 1` (the worker's preStop, `docker stop`) drains lanes as before.
# No -g: the TERM goes to lanes alone, which stops its own sandboxes in order.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "apps/cli/bin/lanes.js"]
CMD ["up"]
