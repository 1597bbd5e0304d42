/**
 * The Pod Security Standards' "restricted" profile (which includes "baseline"), version latest, as
 * the PodSecurity admission controller applies it to a pod spec
 * (kubernetes.io/docs/concepts/security/pod-security-standards). No cluster runs here, so the
 * manifests' pods are checked with this instead. Its own test feeds it each violation in turn.
 * Annotations (the older AppArmor and seccomp forms) are out of scope: lanes sets none.
 */

interface SecurityContext {
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  procMount?: string;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type?: string };
  appArmorProfile?: { type?: string };
  seLinuxOptions?: { type?: string; user?: string; role?: string };
  windowsOptions?: { hostProcess?: boolean };
}

interface ContainerSpec {
  name: string;
  securityContext?: SecurityContext;
  ports?: Array<{ hostPort?: number }>;
}

export interface PodSpec {
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  securityContext?: Omit<SecurityContext, 'privileged' | 'allowPrivilegeEscalation' | 'capabilities' | 'procMount'> & { sysctls?: Array<{ name: string }> };
  containers: ContainerSpec[];
  initContainers?: ContainerSpec[];
  ephemeralContainers?: ContainerSpec[];
  volumes?: Array<Record<string, unknown> & { name: string }>;
}

/** Volume types "restricted" allows: everything else (hostPath, nfs, iscsi, ...) is refused. */
const RESTRICTED_VOLUME_TYPES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);
/** The only capability "restricted" lets a container add back. */
const RESTRICTED_ADDABLE_CAPABILITIES = new Set(['NET_BIND_SERVICE']);
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);
const SECCOMP_ALLOWED = new Set(['RuntimeDefault', 'Localhost']);

/** Every way `pod` breaks Pod Security "restricted", one message each; empty when it is admitted. */
export function restrictedViolations(pod: PodSpec): string[] {
  const out: string[] = [];
  const podSc = pod.securityContext ?? {};
  const containers = [...pod.containers, ...(pod.initContainers ?? []), ...(pod.ephemeralContainers ?? [])];

  // baseline
  for (const ns of ['hostNetwork', 'hostPID', 'hostIPC'] as const) if (pod[ns] === true) out.push(`host namespaces: ${ns}`);
  if (podSc.windowsOptions?.hostProcess === true) out.push('hostProcess: pod');
  for (const s of podSc.sysctls ?? []) if (!SAFE_SYSCTLS.has(s.name)) out.push(`sysctls: ${s.name}`);
  const podSeLinux = podSc.seLinuxOptions;
  if (podSeLinux && (!SELINUX_TYPES.has(podSeLinux.type ?? '') || podSeLinux.user !== undefined || podSeLinux.role !== undefined)) out.push('seLinuxOptions: pod');
  if (podSc.appArmorProfile?.type !== undefined && !SECCOMP_ALLOWED.has(podSc.appArmorProfile.type)) out.push('appArmorProfile: pod');

  // restricted
  for (const v of pod.volumes ?? []) {
    const type = Object.keys(v).find((k) => k !== 'name');
    if (!type || !RESTRICTED_VOLUME_TYPES.has(type)) out.push(`volume types: ${v.name} is ${type ?? 'of no type'}`);
  }
  if (podSc.runAsUser === 0) out.push('runAsUser: pod is 0');
  const podSeccomp = podSc.seccompProfile?.type;
  if (podSeccomp !== undefined && !SECCOMP_ALLOWED.has(podSeccomp)) out.push(`seccompProfile: pod is ${podSeccomp}`);

  for (const c of containers) {
    const sc = c.securityContext ?? {};
    const where = `container ${c.name}`;
    if (sc.privileged === true) out.push(`privileged: ${where}`);
    if (sc.windowsOptions?.hostProcess === true) out.push(`hostProcess: ${where}`);
    for (const p of c.ports ?? []) if (p.hostPort !== undefined && p.hostPort !== 0) out.push(`hostPorts: ${where} ${p.hostPort}`);
    if (sc.procMount !== undefined && sc.procMount !== 'Default') out.push(`procMount: ${where}`);
    const se = sc.seLinuxOptions;
    if (se && (!SELINUX_TYPES.has(se.type ?? '') || se.user !== undefined || se.role !== undefined)) out.push(`seLinuxOptions: ${where}`);
    if (sc.appArmorProfile?.type !== undefined && !SECCOMP_ALLOWED.has(sc.appArmorProfile.type)) out.push(`appArmorProfile: ${where}`);
    if (sc.allowPrivilegeEscalation !== false) out.push(`allowPrivilegeEscalation: ${where} must set false`);
    const nonRoot = sc.runAsNonRoot ?? podSc.runAsNonRoot;
    if (nonRoot !== true) out.push(`runAsNonRoot: ${where} must be true (on the pod or the container)`);
    if (sc.runAsUser === 0) out.push(`runAsUser: ${where} is 0`);
    const seccomp = sc.seccompProfile?.type ?? podSeccomp;
    if (seccomp === undefined || !SECCOMP_ALLOWED.has(seccomp)) out.push(`seccompProfile: ${where} must be RuntimeDefault or Localhost (on the pod or the container)`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) out.push(`capabilities: ${where} must drop ALL`);
    for (const cap of sc.capabilities?.add ?? []) if (!RESTRICTED_ADDABLE_CAPABILITIES.has(cap)) out.push(`capabilities: ${where} adds ${cap}`);
  }
  return out;
}
