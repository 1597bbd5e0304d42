// The local Modal server's stand-in for Modal's in-sandbox helper /__modal/.bin/modal-sandbox-fs-tools,
// which the SDK execs for every `sandbox.filesystem` call: argv[2] is one JSON command, data flows on
// stdin/stdout, and a failure exits non-zero with {"error_kind","message"} on stderr (the SDK maps
// error_kind to its SandboxFilesystem*Error classes). Only the commands lanes' provider uses, plus
// the trivial ones, are implemented.
import { mkdirSync, readFileSync, writeFileSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

const KINDS = {
  ENOENT: 'NotFound',
  EISDIR: 'IsDirectory',
  ENOTDIR: 'NotDirectory',
  EACCES: 'PermissionDenied',
  EPERM: 'PermissionDenied',
  EEXIST: 'PathAlreadyExists',
  ENOTEMPTY: 'DirectoryNotEmpty',
};

function fail(err) {
  process.stderr.write(JSON.stringify({ error_kind: KINDS[err.code] ?? 'Other', message: err.message, detail: '' }));
  process.exit(1);
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const command = JSON.parse(process.argv[2] ?? '{}');
try {
  if (command.ReadFile) {
    const path = command.ReadFile.path;
    if (statSync(path).isDirectory()) fail(Object.assign(new Error('is a directory'), { code: 'EISDIR' }));
    process.stdout.write(readFileSync(path));
  } else if (command.WriteFile) {
    const path = command.WriteFile.path;
    const data = await readStdin();
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, data);
  } else if (command.MakeDirectory) {
    mkdirSync(command.MakeDirectory.path, { recursive: command.MakeDirectory.parents });
  } else if (command.Remove) {
    rmSync(command.Remove.path, { recursive: command.Remove.recursive });
  } else {
    process.stderr.write(JSON.stringify({ error_kind: 'NotSupported', message: `unsupported command ${Object.keys(command)[0]}`, detail: '' }));
    process.exit(2);
  }
} catch (err) {
  fail(err);
}
