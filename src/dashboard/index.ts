/**
 * reactive-delayed-events/dashboard: a web dashboard to watch and steer the
 * service, as a Node request handler to mount in node:http, Express, Fastify
 * or NestJS (docs/recipes.md), also started by `delayed-events dashboard`.
 */
export { type DashboardHandler, type DashboardOptions, createDashboard } from './create-dashboard';
export type { DashboardSource, Overview, TypeOverview } from './dashboard-api';
export type { DashboardAuth } from './request-guard';
