import { parseCard, type LaneConfig } from '@lanes/contracts';

/**
 * How many synthetic cards an API validates as it starts. V8 compiles a function when it first
 * runs and optimizes it once it is hot, so without this the first burst after a deploy pays for
 * both inside its POST (bench/burst.ts's fresh stack; `bench/README.md`, "burst"). The cards are
 * validated and dropped: nothing reaches Redis.
 */
export const BOOT_VALIDATION_WARMUP_CARDS = 2_000;

/**
 * Validates `count` cards of a configured lane through the schema POST /v1/cards uses; answers how
 * many passed. A warm-up never stops an API from starting: a card it cannot make ends it there.
 */
export function warmCardValidation(lanes: readonly Pick<LaneConfig, 'name'>[], count: number = BOOT_VALIDATION_WARMUP_CARDS): number {
  const lane = lanes[0]?.name;
  if (lane === undefined) return 0;
  let passed = 0;
  try {
    for (let i = 0; i < count; i++) {
      // Bulk paths, as a board's POST of many cards has them.
      parseCard({ id: `warmup-${i}`, lane, title: 'warm-up' }, () => `warmup-${i}`, ['cards', i]);
      passed += 1;
    }
  } catch {
    // Only a lane name the card schema refuses gets here, and the lane config's schema is the same one.
  }
  return passed;
}
