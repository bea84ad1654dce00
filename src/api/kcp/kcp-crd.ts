import { InvalidInputError } from '../errors.ts';
import { KCP_GROUP, KCP_KIND, KCP_PLURAL, KCP_VERSION } from './kubeadm-control-plane.ts';

/**
 * Cluster API's KubeadmControlPlane CRD (controller-gen's base, from the sigs.k8s.io/cluster-api Go
 * module) made safe to apply without Cluster API's conversion webhook. Its base serves v1beta1 and
 * v1beta2 and names no conversion (so None: the API server only rewrites apiVersion); Cluster API's
 * kustomize patch adds the webhook. Without the webhook, a v1beta1 object would be stored as v1beta2
 * with its fields in the wrong places, so only v1beta2, the storage version, stays served.
 */

export const KCP_CRD_NAME = `${KCP_PLURAL}.${KCP_GROUP}`;

interface CrdVersion {
  name?: unknown;
  served?: unknown;
  storage?: unknown;
  subresources?: { scale?: { specReplicasPath?: unknown } };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The CRD to apply: conversion None and v1beta2 alone served. InvalidInputError for any other document. */
export function kcpCrdForFastplane(doc: unknown, source: string): Record<string, unknown> {
  const problem = (text: string): InvalidInputError => new InvalidInputError([`--kubeadm-control-plane-crd: ${source}: ${text}`]);
  if (!isObject(doc) || doc.kind !== 'CustomResourceDefinition' || !isObject(doc.metadata) || doc.metadata.name !== KCP_CRD_NAME || !isObject(doc.spec)) {
    throw problem(`not the CustomResourceDefinition ${KCP_CRD_NAME}`);
  }
  const names = doc.spec.names;
  if (!isObject(names) || names.kind !== KCP_KIND) throw problem(`its kind is not ${KCP_KIND}`);
  const versions = Array.isArray(doc.spec.versions) ? (doc.spec.versions as CrdVersion[]) : [];
  const stored = versions.find((v) => v.name === KCP_VERSION);
  if (stored?.storage !== true) throw problem(`${KCP_VERSION} is not its storage version (Cluster API v1.11 or later has it)`);
  // kubectl scale goes through the scale subresource, which reads and writes spec.replicas.
  if (stored.subresources?.scale?.specReplicasPath !== '.spec.replicas') throw problem(`${KCP_VERSION} has no scale subresource on .spec.replicas`);
  return {
    ...doc,
    spec: { ...doc.spec, conversion: { strategy: 'None' }, versions: versions.map((v) => ({ ...v, served: v.name === KCP_VERSION })) },
  };
}
