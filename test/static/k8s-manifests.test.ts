import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { PROJECT_DIR } from '@lanes/cli';
import { LanesEnvSchema, parseLanesConfig, type LaneConfigInput } from '@lanes/contracts';
import { freePort, spawnWorker, startRedis, startTestStack, waitFor, type TestRedis, type TestStack, type WorkerProcess } from '../harness/index.js';

/** No cluster runs here: the manifests are checked against the repo, and their API paths against a running API. */
const dir = join(PROJECT_DIR, 'deploy/k8s');
const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
const cliMain = readFileSync(join(PROJECT_DIR, 'apps/cli/src/main.ts'), 'utf8');
const dockerfile = readFileSync(join(PROJECT_DIR, 'Dockerfile'), 'utf8');

interface Container {
  name: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
  ports?: Array<{ name: string; containerPort: number }>;
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
}
// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML, narrowed where read
type Doc = { kind: string; apiVersion: string; metadata: { name: string; namespace?: string }; spec?: any; data?: Record<string, string> };

const docs: Array<{ file: string; doc: Doc }> = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => {
    if (d.errors.length) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
    return { file, doc: d.toJS() as Doc };
  }),
);
const find = (kind: string, name: string): Doc => {
  const hit = docs.find((d) => d.doc.kind === kind && d.doc.metadata.name === name);
  if (!hit) throw new Error(`no ${kind} ${name} in deploy/k8s`);
  return hit.doc;
};
const deployments = docs.filter((d) => d.doc.kind === 'Deployment').map((d) => d.doc);
const containers = (d: Doc): Container[] => d.spec.template.spec.containers;
const config = parseLanesConfig(JSON.parse(find('ConfigMap', 'lanes-config').data!['lanes.json']!));
const scaled = find('ScaledObject', 'lanes-worker');
const trigger = scaled.spec.triggers.find((t: { type: string }) => t.type === 'metrics-api') as {
  metadata: { url: string; valueLocation: string; authMode: string; targetValue: string };
  authenticationRef: { name: string };
};

/** The `node` user of the official Node images. */
const NODE_UID = 1000;

/** Read a GJSON path of plain dotted keys (all the manifests use) from a JSON body. */
const atPath = (body: unknown, path: string): unknown => path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], body);

describe('deploy/k8s manifests', () => {
  it('every YAML file parses, and every document has a kind, an apiVersion and the lanes namespace', () => {
    expect(files.length).toBeGreaterThanOrEqual(6);
    for (const { file, doc } of docs) {
      expect(doc.kind, file).toBeTruthy();
      expect(doc.apiVersion, file).toBeTruthy();
      if (doc.kind !== 'Namespace') expect(doc.metadata.namespace, `${file} ${doc.kind}`).toBe('lanes');
    }
  });

  it('deploys the api, the supervisor and the workers, each running a real lanes subcommand of the image', () => {
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(['lanes-api', 'lanes-supervisor', 'lanes-worker']);
    for (const d of deployments) {
      const [command] = containers(d)[0]!.args!;
      expect(cliMain, `${d.metadata.name} runs ${command}`).toContain(`case '${command}':`);
    }
  });

  it('sets only env vars the config reads, and takes tokens, Redis and Modal credentials from a Secret', () => {
    // The environment's own settings, and the variables the config's tokens are read from.
    const tokenVars = (config.tokens ?? []).flatMap((t) => (t.fromEnv ? [t.fromEnv] : []));
    const known = [...Object.keys(LanesEnvSchema.shape), ...tokenVars];
    const secret = new Set(['REDIS_URL', 'LANES_API_TOKENS', 'MODAL_TOKEN_ID', 'MODAL_TOKEN_SECRET', ...tokenVars]);
    for (const d of deployments) {
      for (const c of containers(d)) {
        for (const e of c.env ?? []) {
          expect(known, `${d.metadata.name}: ${e.name}`).toContain(e.name);
          if (secret.has(e.name)) expect(e.valueFrom?.secretKeyRef?.name, `${d.metadata.name}: ${e.name}`).toBe('lanes-secrets');
        }
      }
    }
  });

  it('runs untrusted agents off the worker pod: every lane is a Modal lane, whose agent and files are in the image, and the pod needs Modal credentials', () => {
    // README "Threat model": a local lane in a uid-1000 pod without CAP_SYS_ADMIN is process-group mode, trusted agents only.
    for (const lane of config.lanes) {
      expect(lane.provider, lane.name).toBe('modal');
      for (const f of lane.files) expect(existsSync(join(PROJECT_DIR, f.from.replace(/^\/app\//, ''))), `${lane.name}: ${f.from} in the image`).toBe(true);
      const synced = lane.files.map((f) => f.to);
      expect(
        lane.agent.some((a) => synced.some((to) => a.startsWith(`${to}/`))),
        `${lane.name}: its agent is among the files synced into the sandbox`,
      ).toBe(true);
    }
    for (const name of ['lanes-worker', 'lanes-supervisor']) {
      const env = containers(find('Deployment', name))[0]!.env ?? [];
      for (const v of ['MODAL_TOKEN_ID', 'MODAL_TOKEN_SECRET']) {
        const ref = env.find((e) => e.name === v)?.valueFrom?.secretKeyRef as { optional?: boolean } | undefined;
        expect(ref, `${name}: ${v}`).toBeDefined();
        expect(ref?.optional, `${name}: ${v} is required`).not.toBe(true);
      }
    }
    // The Dockerfile puts the repo at /app, where the lanes' files come from.
    expect(dockerfile).toMatch(/WORKDIR \/app/);
  });

  it('mounts a lanes config that validates, at the LANES_CONFIG path', () => {
    expect(config.lanes.length).toBeGreaterThan(0);
    for (const d of deployments) {
      const c = containers(d)[0]!;
      expect(c.env!.find((e) => e.name === 'LANES_CONFIG')!.value).toBe('/etc/lanes/lanes.json');
    }
  });

  it('gives workers a grace period that covers the drain, and a preStop that drains the entrypoint', () => {
    const worker = find('Deployment', 'lanes-worker');
    const graceMs = worker.spec.template.spec.terminationGracePeriodSeconds * 1_000;
    // Drain: each running card is stopped (SIGINT → killGraceMs → SIGTERM → killGraceMs → SIGKILL),
    // handed back, then sandboxes are terminated; this allowance is for the provider's terminate calls.
    const TERMINATE_ALLOWANCE_MS = 30_000;
    for (const lane of config.lanes) expect(graceMs, lane.name).toBeGreaterThanOrEqual(2 * lane.killGraceMs + TERMINATE_ALLOWANCE_MS);
    const preStop = containers(worker)[0]!.lifecycle!.preStop!.exec!.command.join(' ');
    expect(preStop).toContain('kill -TERM 1');
    // PID 1 must be the lanes process itself (exec-form ENTRYPOINT, no shell), or the TERM misses it.
    expect(dockerfile).toContain('ENTRYPOINT ["node", "apps/cli/bin/lanes.js"]');
    // …and that process drains on SIGTERM.
    expect(readFileSync(join(PROJECT_DIR, 'apps/cli/src/up.ts'), 'utf8')).toContain("process.once('SIGTERM', shutdown)");
  });

  it('scales the shipped lane to zero: minSlots 0, and a ScaledObject that may go to 0 replicas', () => {
    expect(config.lanes.map((l) => l.minSlots)).toEqual([0]);
    expect(scaled.spec.minReplicaCount).toBe(0);
  });

  it('points the api Service at the container port, and the ScaledObject at the Service and the worker Deployment', () => {
    const service = find('Service', 'lanes-api');
    const api = containers(find('Deployment', 'lanes-api'))[0]!;
    const port = service.spec.ports[0];
    expect(api.ports!.map((p) => p.name)).toContain(port.targetPort);
    expect(service.spec.selector).toEqual(find('Deployment', 'lanes-api').spec.selector.matchLabels);
    const url = new URL(trigger.metadata.url);
    expect(url.hostname).toBe(`${service.metadata.name}.${service.metadata.namespace}.svc.cluster.local`);
    expect(Number(url.port)).toBe(port.port);
    expect(scaled.spec.scaleTargetRef.name).toBe('lanes-worker');
    const lane = url.pathname.match(/^\/v1\/lanes\/([^/]+)\/scale$/)?.[1];
    expect(config.lanes.map((l) => l.name)).toContain(lane);
  });

  it('authenticates the KEDA trigger with a bearer token from the Secret', () => {
    expect(trigger.metadata.authMode).toBe('bearer');
    const auth = find('TriggerAuthentication', trigger.authenticationRef.name);
    expect(auth.spec.secretTargetRef).toEqual([expect.objectContaining({ parameter: 'token', name: 'lanes-secrets' })]);
  });

  it("KEDA's and Prometheus' tokens are read tokens the API takes from the same Secret keys", () => {
    const api = containers(find('Deployment', 'lanes-api'))[0]!;
    const secretKeyOf = (envName: string) => api.env!.find((e) => e.name === envName)?.valueFrom?.secretKeyRef?.key;
    const kedaKey = find('TriggerAuthentication', trigger.authenticationRef.name).spec.secretTargetRef[0].key as string;
    const keda = config.tokens!.find((t) => t.fromEnv !== undefined && secretKeyOf(t.fromEnv) === kedaKey);
    expect(keda, `a config token read from secret key ${kedaKey}`).toBeDefined();
    expect(keda!.role).toBe('read');
    const lane = new URL(trigger.metadata.url).pathname.split('/')[3]!;
    expect(keda!.lanes === '*' || keda!.lanes.includes(lane)).toBe(true);
    // Prometheus scrapes /metrics, which needs a read token over every lane.
    const metrics = config.tokens!.find((t) => t.name === 'prometheus')!;
    expect(metrics).toMatchObject({ role: 'read', lanes: '*' });
    expect(secretKeyOf(metrics.fromEnv!)).toBe('metrics-token');
  });

  it('gives the workers liveness and readiness probes on the LANES_HEALTH_PORT they set', () => {
    const worker = containers(find('Deployment', 'lanes-worker'))[0]!;
    const port = Number(worker.env!.find((e) => e.name === 'LANES_HEALTH_PORT')!.value);
    for (const probe of [worker.livenessProbe!.httpGet!, worker.readinessProbe!.httpGet!]) {
      expect(worker.ports!.find((p) => p.name === probe.port)?.containerPort).toBe(port);
    }
    expect(worker.livenessProbe!.httpGet!.path).toBe('/healthz');
    expect(worker.readinessProbe!.httpGet!.path).toBe('/readyz');
  });

  it("runs every pod as a non-root user, the image's own", () => {
    for (const d of deployments) {
      const sc = d.spec.template.spec.securityContext;
      expect(sc, d.metadata.name).toMatchObject({ runAsNonRoot: true, runAsUser: NODE_UID });
    }
    expect(dockerfile).toMatch(/^USER node$/m);
  });

  it('has PodDisruptionBudgets selecting the workers and the api', () => {
    const pdbs = docs.filter((d) => d.doc.kind === 'PodDisruptionBudget').map((d) => d.doc.spec.selector.matchLabels);
    for (const name of ['lanes-worker', 'lanes-api']) expect(pdbs).toContainEqual(find('Deployment', name).spec.selector.matchLabels);
  });
});

describe('deploy/k8s paths against a running API', () => {
  /** KEDA's token, as lanes-api reads it from LANES_KEDA_TOKEN. */
  const TOKEN = 'k8s-static-keda-token';
  const METRICS_TOKEN = 'k8s-static-metrics-token';
  const ADMIN_TOKEN = 'k8s-static-admin-token';
  let redis: TestRedis;
  let t: TestStack;
  beforeAll(async () => {
    redis = await startRedis();
    // The manifests' own lanes config; only the API runs, so the in-image agent path is never used.
    t = await startTestStack(redis.url, JSON.parse(find('ConfigMap', 'lanes-config').data!['lanes.json']!).lanes, {
      tokens: [ADMIN_TOKEN],
      scopedTokens: config.tokens!,
      tokenEnv: { LANES_KEDA_TOKEN: TOKEN, LANES_METRICS_TOKEN: METRICS_TOKEN },
      parts: { api: true, worker: false, supervisor: false },
    });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it("the ScaledObject's URL path answers with a number at its valueLocation, and 401 without the token", async () => {
    const path = new URL(trigger.metadata.url).pathname;
    expect((await fetch(`${t.stack.url}${path}`)).status).toBe(401);
    const res = await fetch(`${t.stack.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    const value = atPath(await res.json(), trigger.metadata.valueLocation);
    expect(typeof value).toBe('number');
    // Idle lane: minSlots of the lane over its slots per worker.
    const lane = config.lanes[0]!;
    expect(value).toBe(Math.ceil(lane.minSlots / lane.slots));
  });

  it("KEDA's token reads the scale figure and nothing more; Prometheus' token reads /metrics", async () => {
    const as = (token: string) => ({ authorization: `Bearer ${token}` });
    const post = await fetch(`${t.stack.url}/v1/cards`, {
      method: 'POST',
      headers: { ...as(TOKEN), 'content-type': 'application/json' },
      body: JSON.stringify({ lane: config.lanes[0]!.name, title: 'x' }),
    });
    expect(post.status).toBe(403);
    expect((await fetch(`${t.stack.url}/admin/queues`, { headers: as(TOKEN) })).status).toBe(403);
    expect((await fetch(`${t.stack.url}/metrics`, { headers: as(TOKEN) })).status).toBe(403);
    expect((await fetch(`${t.stack.url}/metrics`, { headers: as(METRICS_TOKEN) })).status).toBe(200);
    const postAsScraper = await fetch(`${t.stack.url}/v1/cards`, { method: 'POST', headers: { ...as(METRICS_TOKEN), 'content-type': 'application/json' }, body: '{}' });
    expect(postAsScraper.status).toBe(403);
  });

  it.each(['liveness', 'readiness'] as const)('the api %s probe path answers 200', async (kind) => {
    const probe = containers(find('Deployment', 'lanes-api'))[0]![`${kind}Probe`]!.httpGet!;
    expect((await fetch(`${t.stack.url}${probe.path}`)).status).toBe(200);
  });
});

describe('deploy/k8s worker probes against a running lanes worker', () => {
  let redis: TestRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-k8s-worker-'));
  });
  afterAll(async () => {
    if (worker && worker.child.exitCode === null && worker.child.signalCode === null) {
      const exited = new Promise((r) => worker!.child.once('exit', r));
      worker.child.kill('SIGTERM');
      await exited;
    }
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers the liveness and readiness probe paths of the worker Deployment, and readiness answers 503 while it drains', async () => {
    const c = containers(find('Deployment', 'lanes-worker'))[0]!;
    // The manifests' own lanes config and probe paths; a free port stands in for the container's.
    const port = await freePort();
    // The manifests' own lanes, on the local provider: the probes answer the same whatever a lane's
    // provider is, and no Modal account is reached from here (the lane's own agent is not needed).
    const lanes = (JSON.parse(find('ConfigMap', 'lanes-config').data!['lanes.json']!).lanes as LaneConfigInput[]).map(({ files: _files, image: _image, ...lane }) => ({
      ...lane,
      provider: 'local' as const,
      agent: ['true'],
    }));
    worker = spawnWorker({ dir, redisUrl: redis.url, sandboxDir: join(dir, 'sandboxes'), lanes, env: { LANES_HEALTH_PORT: String(port), LANES_HEARTBEAT_INTERVAL_MS: '200' } });
    const url = (path: string) => `http://127.0.0.1:${port}${path}`;
    await waitFor('the worker readiness probe to answer 200', async () => (await fetch(url(c.readinessProbe!.httpGet!.path))).status === 200, { timeoutMs: 30_000 });
    expect((await fetch(url(c.livenessProbe!.httpGet!.path))).status).toBe(200);
    // Draining: not ready any more, still alive, until the process is gone.
    const exited = new Promise((r) => worker!.child.once('exit', r));
    worker.child.kill('SIGTERM');
    const seen = await waitFor('readiness 503 while draining, or the exit', async () => {
      if (worker!.child.exitCode !== null) return 'exited';
      const res = await fetch(url('/readyz')).catch(() => undefined);
      return res?.status === 503 ? 'not-ready' : undefined;
    });
    expect(seen).toBe('not-ready');
    await exited;
  });
});
