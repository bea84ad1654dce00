import { z } from 'zod';

/**
 * The status of a ControlPlane object on a management cluster, written through the status
 * subresource: the replica counters and `metav1.Condition`s (Cluster API's v1beta2 shape). It is
 * the schema of the CRD's `status`, so `kubectl explain` and the printer columns read it.
 */

const ConditionSchema = z
  .object({
    type: z.string().min(1).describe('The condition: Available, ScalingUp, ScalingDown, RollingOut, Remediating, ...'),
    status: z.enum(['True', 'False', 'Unknown']).describe('True, False or Unknown.'),
    reason: z.string().optional().describe('Why, in one CamelCase word.'),
    message: z.string().optional().describe('Why, in words.'),
    lastTransitionTime: z.iso.datetime().describe('When status last changed.'),
    observedGeneration: z.number().int().min(0).optional().describe('The metadata.generation the condition was set for.'),
  })
  .strict();

export const ControlPlaneStatusSchema = z
  .object({
    observedGeneration: z.number().int().min(0).optional().describe('The metadata.generation the controller last acted on.'),
    replicas: z.number().int().min(0).optional().describe('Machines of the control plane, whatever their state.'),
    readyReplicas: z.number().int().min(0).optional().describe('Machines whose member is a healthy voter.'),
    upToDateReplicas: z.number().int().min(0).optional().describe('Machines at the spec\'s versions (etcd, and Kubernetes when it runs).'),
    voters: z.number().int().min(0).optional().describe('Voting etcd members.'),
    learners: z.number().int().min(0).optional().describe('etcd learners still catching up.'),
    version: z.string().optional().describe('The etcd version every member runs (the lowest while a rollout runs).'),
    conditions: z.array(ConditionSchema).optional().describe('The conditions of the control plane, one per type.'),
  })
  .strict()
  .describe('What the controller last observed.');

export type ControlPlaneStatus = z.infer<typeof ControlPlaneStatusSchema>;
