import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { evaluateBind } from '@lanes/api';
import { PROJECT_DIR } from '@lanes/cli';
import { LanesEnvSchema, parseEnv, parseLanesConfig } from '@lanes/contracts';

/** No Docker engine runs here, so the compose file and Dockerfile are checked statically against the repo. */
const root = PROJECT_DIR;
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<
    string,
    { build?: string; command?: string[]; environment?: Record<string, string>; volumes?: string[]; depends_on?: Record<string, unknown>; ports?: string[] }
  >;
};
const composeText = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const cliMain = readFileSync(join(root, 'apps/cli/src/main.ts'), 'utf8');

describe('docker-compose.yml', () => {
  it('runs redis and the three lanes parts', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['api', 'redis', 'supervisor', 'worker']);
  });

  it.each(['api', 'worker', 'supervisor'])('%s runs a real lanes subcommand from the built image on the compose redis', (name) => {
    const svc = compose.services[name]!;
    expect(svc.build).toBe('.');
    const [command] = svc.command!;
    expect(cliMain).toContain(`case '${command}':`);
    expect(svc.environment!.REDIS_URL).toBe('redis://redis:6379');
    expect(svc.depends_on).toHaveProperty('redis');
  });

  it('mounts a lanes config that validates', () => {
    const mount = compose.services.worker!.volumes!.find((v) => v.endsWith(':/etc/lanes/lanes.json:ro'))!;
    const host = mount.split(':')[0]!;
    const config = parseLanesConfig(JSON.parse(readFileSync(join(root, host), 'utf8')));
    const agent = config.lanes[0]!.agent[1]!;
    // The agent path is inside the image at /app; it must exist in the repo at the same relative path.
    expect(existsSync(join(root, agent.replace(/^\/app\//, '')))).toBe(true);
  });

  it.each(['worker', 'supervisor'])('probes the %s on the LANES_HEALTH_PORT it sets, a variable the config reads', (name) => {
    const svc = compose.services[name]! as { environment?: Record<string, string>; healthcheck?: { test: string[] } };
    const port = svc.environment!.LANES_HEALTH_PORT!;
    expect(Object.keys(LanesEnvSchema.shape)).toContain('LANES_HEALTH_PORT');
    expect(svc.healthcheck!.test.join(' ')).toContain(`http://127.0.0.1:${port}/readyz`);
  });

  it("leaves PID 1 to the image's tini: no `init: true` (a second init in front of it), no entrypoint of its own", () => {
    for (const name of ['api', 'worker', 'supervisor']) {
      const svc = compose.services[name]! as { init?: boolean; entrypoint?: unknown };
      expect(svc.init, name).toBeUndefined();
      expect(svc.entrypoint, name).toBeUndefined();
    }
  });

  it('publishes every port on 127.0.0.1 only', () => {
    const published = Object.entries(compose.services).flatMap(([name, svc]) => (svc.ports ?? []).map((p) => [name, String(p)] as const));
    expect(published.map(([name]) => name).sort()).toEqual(['api', 'redis']);
    for (const [name, port] of published) expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
  });

  it('runs no API without a token: LANES_API_TOKENS comes from the host alone, and the API refuses its LANES_HOST without one', () => {
    const api = compose.services.api!.environment!;
    // The raw text: the host's variable, with no token baked in as a default.
    expect(composeText).toMatch(/^ {6}LANES_API_TOKENS: \$\{LANES_API_TOKENS:-\}$/m);
    expect(composeText.match(/^\s*LANES_API_TOKENS:/gm)).toHaveLength(1);
    // As compose hands it over with the variable unset: empty, which lanes reads as no tokens (open)…
    const env = parseEnv({ LANES_HOST: api.LANES_HOST, LANES_API_TOKENS: '' });
    expect(env.LANES_API_TOKENS).toBeUndefined();
    // …and open mode refuses to listen on the address the container uses.
    expect(evaluateBind(env.LANES_HOST!, { open: true }).action).toBe('refuse');
    expect(evaluateBind(env.LANES_HOST!, { open: false }).action).toBe('bind');
    // Workers and the supervisor never hold the API's tokens.
    for (const name of ['worker', 'supervisor']) expect(Object.keys(compose.services[name]!.environment!), name).not.toContain('LANES_API_TOKENS');
  });

  it('keeps redis on noeviction with AOF, as production guidance says', () => {
    const cmd = compose.services.redis!.command!.join(' ');
    expect(cmd).toContain('--appendonly yes');
    expect(cmd).toContain('--maxmemory-policy noeviction');
  });
});

describe('Dockerfile', () => {
  it('copies only paths that exist and every workspace manifest', () => {
    const copies = [...dockerfile.matchAll(/^COPY (.+) (\S+)$/gm)].flatMap((m) => m[1]!.split(/\s+/));
    for (const src of copies) expect(existsSync(join(root, src)), src).toBe(true);
    // Every workspace on disk, so a new package cannot be forgotten here as it could in a list.
    const workspaces = ['libs', 'apps'].flatMap((top) => readdirSync(join(root, top)).map((d) => `${top}/${d}`)).filter((ws) => existsSync(join(root, ws, 'package.json')));
    expect(workspaces).toContain('libs/client');
    for (const ws of workspaces) expect(copies).toContain(`${ws}/package.json`);
  });

  it('starts the lanes bin that exists, on the Active LTS (Node 26) on Debian trixie, within the engines range', () => {
    // Node 26's default Debian: bookworm's support ends before Node 26's does.
    expect(dockerfile).toMatch(/^FROM node:26-trixie-slim$/m);
    const major = Number(/^FROM node:(\d+)-/m.exec(dockerfile)?.[1]);
    expect(major).toBe(26);
    const { engines } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
    // ">=20.19 <27": the image's Node and the machines' Node 20 are both inside the stated range.
    const [, lowMajor, upper] = /^>=(\d+)\.\d+ <(\d+)$/.exec(engines.node) ?? [];
    expect(major).toBeGreaterThanOrEqual(Number(lowMajor));
    expect(major).toBeLessThan(Number(upper));
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(Number(lowMajor));
    expect(dockerfile).toContain('ENTRYPOINT ["/usr/bin/tini", "--", "node", "apps/cli/bin/lanes.js"]');
    expect(existsSync(join(root, 'apps/cli/bin/lanes.js'))).toBe(true);
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    // The image installs without devDependencies and runs from source: tsx must be a runtime dependency.
    expect(pkg.dependencies.tsx).toBeDefined();
  });

  it("runs tini, Debian's package, as PID 1 in front of lanes (exec form: no shell in between)", () => {
    const install = /^RUN apt-get update[\s\S]*?apt-get install -y --no-install-recommends ([^\\\n]+)/m.exec(dockerfile)?.[1]?.trim().split(/\s+/);
    expect(install).toContain('tini');
    const entrypoints = [...dockerfile.matchAll(/^ENTRYPOINT (.+)$/gm)].map((m) => JSON.parse(m[1]!) as string[]);
    expect(entrypoints).toHaveLength(1);
    expect(entrypoints[0]!.slice(0, 3)).toEqual(['/usr/bin/tini', '--', 'node']);
  });

  it('runs as the unprivileged node user, who owns only the directories lanes writes', () => {
    const user = /^USER (\S+)$/gm.exec(dockerfile)?.[1];
    expect(user).toBe('node');
    // After the last RUN: nothing later runs as root.
    expect(dockerfile.lastIndexOf('\nUSER node')).toBeGreaterThan(dockerfile.lastIndexOf('\nRUN '));
    expect(dockerfile).toMatch(/chown node:node \/var\/lib\/lanes\/sandboxes/);
    expect(dockerfile).toContain('ENV NODE_ENV=production \\\n    LANES_SANDBOX_DIR=/var/lib/lanes/sandboxes');
  });
});
