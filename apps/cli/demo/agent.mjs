#!/usr/bin/env node
// The demo lane's agent: works a PR card for real on a local git repository.
// It reads the card from LANES_CARD_FILE (card text never reaches a shell), makes the card's
// branch, commits a change describing the card, and writes result.json with the commit.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const card = JSON.parse(readFileSync(process.env.LANES_CARD_FILE, 'utf8'));
const out = process.env.LANES_OUTPUT_DIR;
const work = process.env.LANES_WORK_DIR ?? process.cwd();
const repo = join(work, 'demo-repo');
const git = (...args) =>
  execFileSync('git', ['-c', 'user.name=lanes demo agent', '-c', 'user.email=agent@lanes.invalid', '-c', 'init.defaultBranch=main', ...args], {
    cwd: repo,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();

if (card.metadata?.needsHuman) {
  writeFileSync(join(out, 'blocked.json'), JSON.stringify({ reason: String(card.metadata.needsHuman) }));
  console.log('asking for a human');
  process.exit(75);
}
if (card.metadata?.fail) {
  console.error(`failing on purpose: ${card.metadata.fail}`);
  process.exit(3);
}
if (card.metadata?.sleepMs) await new Promise((r) => setTimeout(r, Number(card.metadata.sleepMs)));

if (!existsSync(join(repo, '.git'))) {
  mkdirSync(repo, { recursive: true });
  git('init', '-q');
  writeFileSync(join(repo, 'README.md'), '# demo repository\n');
  git('add', 'README.md');
  git('commit', '-q', '-m', 'initial commit');
}
const base = card.pr?.base ?? 'main';
const branch = card.pr?.branch ?? `lanes/${card.id}`;
git('checkout', '-q', '-B', branch, base);
mkdirSync(join(repo, 'cards'), { recursive: true });
writeFileSync(join(repo, 'cards', `${card.id}.md`), `# ${card.title}\n\n${card.prompt ?? ''}\n`);
git('add', '-A');
git('commit', '-q', '-m', `${card.title}`, '-m', `card ${card.id}`);
const commit = git('rev-parse', 'HEAD');
console.log(`committed ${commit} on ${branch}`);
writeFileSync(join(out, 'result.json'), JSON.stringify({ branch, base, commit, repo, files: [`cards/${card.id}.md`] }, null, 2));
