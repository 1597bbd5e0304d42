#!/usr/bin/env node
// Runs the CLI straight from TypeScript source: tsx compiles on the fly, and the
// "@lanes/source" export condition points every workspace package at its src/.
import * as nodeModule from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';
import { resolve as addSourceCondition } from './source-condition.js';

registerTsx();
// In this thread where Node has registerHooks (22.15+): Node 26, the images' runtime, deprecates
// register() (DEP0205) and would print the warning at every start. Node 20 has only register().
if (typeof nodeModule.registerHooks === 'function') nodeModule.registerHooks({ resolve: addSourceCondition });
else nodeModule.register('./source-condition.js', import.meta.url);
// Before anything imports the Modal SDK: a wrong package named `modal` would fail that import with a bare SyntaxError.
const { checkModalPackage, installedModalPackage } = await import('../src/modal-package.ts');
const modal = checkModalPackage(installedModalPackage());
if (!modal.ok) {
  process.stderr.write(`lanes: ${modal.reason}\n`);
  process.exit(1);
}
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
