// @lanes/sandbox/testing: doubles for tests and the chaos soak, never the stack's own path.
export { FaultyProvider, createFaultyProvider, FAULTY_KILLED_EXIT_CODE, CARD_ID_ENV as FAULTY_CARD_ID_ENV, type FaultStats } from './faulty-provider.js';
