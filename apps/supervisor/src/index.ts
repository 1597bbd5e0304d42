export { createSupervisorApp, DEFAULT_SWEEP_INTERVAL_MS, FLEET_WINDOW_MS, type SupervisorApp, type SupervisorOptions } from './supervisor-app.js';
