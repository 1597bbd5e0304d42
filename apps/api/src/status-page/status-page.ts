import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { notFound } from '../api-error.js';

export const STATUS_PAGE_PATH = '/';
/** Where the page's script and stylesheet are served; behind the same auth as the page. */
export const STATUS_ASSETS_PATH = '/status-page';

/** The files a browser may fetch, with their types: a fixed list, never a path from the request. */
const ASSETS: Readonly<Record<string, string>> = {
  'status.js': 'text/javascript; charset=utf-8',
  'status-model.js': 'text/javascript; charset=utf-8',
  'page-kit.js': 'text/javascript; charset=utf-8',
  'cards-model.js': 'text/javascript; charset=utf-8',
  'lane-cards.js': 'text/javascript; charset=utf-8',
  'card-panel.js': 'text/javascript; charset=utf-8',
  'status.css': 'text/css; charset=utf-8',
};

/** Only this origin's own script, style and requests: data rendered from cards can never run as code. */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The assets sit beside this file in src; a build to dist/ reads them from src, so no copy step can drift. */
function assetsDir(): string {
  const beside = fileURLToPath(new URL('./assets/', import.meta.url));
  return existsSync(beside) ? beside : fileURLToPath(new URL('../../src/status-page/assets/', import.meta.url));
}

/** The status page at `/`: static HTML and vanilla JS read once at startup, live from /v1/lanes, /v1/cards and /v1/events. */
export function statusPageRoutes(app: FastifyInstance): void {
  const dir = assetsDir();
  const html = readFileSync(`${dir}index.html`, 'utf8');
  const files = new Map(Object.entries(ASSETS).map(([name, type]) => [name, { type, body: readFileSync(`${dir}${name}`, 'utf8') }]));
  const secure = { 'content-security-policy': CONTENT_SECURITY_POLICY, 'x-content-type-options': 'nosniff', 'cache-control': 'no-cache' };

  app.get(STATUS_PAGE_PATH, async (_request, reply) => reply.headers(secure).type('text/html; charset=utf-8').send(html));
  app.get<{ Params: { file: string } }>(`${STATUS_ASSETS_PATH}/:file`, async (request, reply) => {
    const file = files.get(request.params.file);
    if (!file) throw notFound(`${STATUS_ASSETS_PATH}/${request.params.file}`);
    return reply.headers(secure).type(file.type).send(file.body);
  });
}
