#!/usr/bin/env node
// Runs the CLI straight from TypeScript source: tsx compiles on the fly, and the
// "@lanes/source" export condition points every workspace package at its src/.
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
register('./source-condition.js', import.meta.url);
// Before anything imports the Modal SDK: a wrong package named `modal` would fail that import with a bare SyntaxError.
const { checkModalPackage, installedModalPackage } = await import('../src/modal-package.ts');
const modal = checkModalPackage(installedModalPackage());
if (!modal.ok) {
  process.stderr.write(`lanes: ${modal.reason}\n`);
  process.exit(1);
}
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
