import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PROJECT_DIR } from '@lanes/cli';
import { parseLanesConfig } from '@lanes/contracts';

/** No Docker engine runs here, so the compose file and Dockerfile are checked statically against the repo. */
const root = PROJECT_DIR;
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { build?: string; command?: string[]; environment?: Record<string, string>; volumes?: string[]; depends_on?: Record<string, unknown> }>;
};
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

  it('starts the lanes bin that exists, on Node 20', () => {
    expect(dockerfile).toMatch(/^FROM node:20/m);
    expect(dockerfile).toContain('ENTRYPOINT ["node", "apps/cli/bin/lanes.js"]');
    expect(existsSync(join(root, 'apps/cli/bin/lanes.js'))).toBe(true);
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    // The image installs without devDependencies and runs from source: tsx must be a runtime dependency.
    expect(pkg.dependencies.tsx).toBeDefined();
  });
});
