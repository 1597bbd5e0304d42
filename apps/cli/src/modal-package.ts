import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The Modal JS SDK lanes is built and tested against (package.json pins it exactly). */
export const MODAL_SDK_VERSION = '0.11.1';

/** What a package.json says of itself, as read from disk (nothing in it is trusted). */
export interface PackageJsonLike {
  name?: unknown;
  version?: unknown;
  repository?: unknown;
}

export type ModalPackageCheck = { ok: true } | { ok: false; reason: string };

const INSTALL_HINT = `install Modal Labs' SDK with \`npm i -E modal@${MODAL_SDK_VERSION}\` (\`npm i modal\` without a version installs an unrelated browser package of the same name)`;

/**
 * Whether the package installed as `modal` is Modal Labs' JS SDK on the 0.x line lanes pins. On the
 * registry `modal@latest` is an unrelated browser widget: importing the SDK's names from it fails
 * with a bare SyntaxError at start-up, so the CLI checks the package first and says what to do.
 */
export function checkModalPackage(pkg: PackageJsonLike | undefined): ModalPackageCheck {
  if (!pkg) return { ok: false, reason: `no \`modal\` package is installed: ${INSTALL_HINT}` };
  const repository = typeof pkg.repository === 'string' ? pkg.repository : (pkg.repository as { url?: unknown } | undefined)?.url;
  const version = typeof pkg.version === 'string' ? pkg.version : 'unknown';
  if (pkg.name !== 'modal' || typeof repository !== 'string' || !repository.includes('modal-labs/')) {
    return { ok: false, reason: `the installed \`modal\` package (version ${version}) is not Modal Labs' SDK: ${INSTALL_HINT}` };
  }
  if (!version.startsWith('0.')) {
    return { ok: false, reason: `the installed Modal SDK is ${version}, not the 0.x line lanes is built for: ${INSTALL_HINT}` };
  }
  return { ok: true };
}

/**
 * The package.json of the `modal` package this process would import, or undefined when there is
 * none. The SDK's exports map hides `modal/package.json`, so the file is found from its entry point.
 */
export function installedModalPackage(from: string = import.meta.url): PackageJsonLike | undefined {
  let entry: string;
  try {
    entry = createRequire(from).resolve('modal');
  } catch {
    return undefined;
  }
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    let pkg: PackageJsonLike;
    try {
      pkg = JSON.parse(readFileSync(file, 'utf8')) as PackageJsonLike;
    } catch {
      return undefined;
    }
    // A nameless package.json (`{"type": …}` in a dist folder) is not the package's own.
    if (pkg.name !== undefined) return pkg;
  }
  return undefined;
}
