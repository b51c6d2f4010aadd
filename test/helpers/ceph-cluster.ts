// The throw-away Ceph cluster of the rbd tests; it lives in bench/ so that
// bench/rbd.ts, which is compiled with the package, can start one too.
export { cephMissing, startCephCluster, type CephCluster, type CephClusterOptions } from '../../bench/ceph-cluster.js';
