import type { Cluster, Redis } from 'ioredis';

/** A connection the service drives: a single server's, or a Cluster's. */
export type RedisClient = Redis | Cluster;
