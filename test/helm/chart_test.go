// Package helm renders the chart in deploy/helm/kelp with Helm's own
// library (loader, engine, chartutil: what `helm template` does, no cluster)
// and checks the manifests: the masters' Raft peers, labels and selectors,
// probes, the CSI socket paths, the volume servers' data centers and racks.
//
// It is a module of its own (test/helm/go.mod): Helm brings the Kubernetes
// client libraries, which the Kelp module itself does not need.
package helm

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "../../deploy/helm/kelp"
	release   = "kelp"
	namespace = "storage"
)

// manifests are the rendered objects, by kind and name.
type manifests struct {
	statefulSets map[string]*appsv1.StatefulSet
	deployments  map[string]*appsv1.Deployment
	daemonSets   map[string]*appsv1.DaemonSet
	services     map[string]*corev1.Service
	secrets      map[string]*corev1.Secret
	csiDrivers   map[string]*storagev1.CSIDriver
	classes      map[string]*storagev1.StorageClass
	kinds        map[string]int // every kind rendered, with its count
}

// render renders the chart with the values of valuesFile ("" : defaults) and
// overrides, the way `helm template` does.
func render(t *testing.T, valuesFile string, overrides map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals := map[string]any{}
	if valuesFile != "" {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, valuesFile))
		if err != nil {
			t.Fatalf("values %s: %v", valuesFile, err)
		}
		vals = v
	}
	vals = chartutil.CoalesceTables(overrides, vals)
	rv, err := chartutil.ToRenderValues(ch, vals,
		chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1},
		chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("render values: %v", err)
	}
	return engine.Render(ch, rv)
}

// parse decodes every rendered document strictly into its typed API object:
// a misspelt or misplaced field fails the test, as the API server would.
func parse(t *testing.T, files map[string]string) *manifests {
	t.Helper()
	m := &manifests{
		statefulSets: map[string]*appsv1.StatefulSet{}, deployments: map[string]*appsv1.Deployment{},
		daemonSets: map[string]*appsv1.DaemonSet{}, services: map[string]*corev1.Service{},
		secrets: map[string]*corev1.Secret{}, csiDrivers: map[string]*storagev1.CSIDriver{},
		classes: map[string]*storagev1.StorageClass{}, kinds: map[string]int{},
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for i, doc := range strings.Split("\n"+files[name], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s document %d: %v\n%s", name, i, err, doc)
			}
			m.kinds[head.Kind]++
			var obj any
			switch head.Kind {
			case "StatefulSet":
				obj = &appsv1.StatefulSet{}
			case "Deployment":
				obj = &appsv1.Deployment{}
			case "DaemonSet":
				obj = &appsv1.DaemonSet{}
			case "Service":
				obj = &corev1.Service{}
			case "Secret":
				obj = &corev1.Secret{}
			case "ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "CSIDriver":
				obj = &storagev1.CSIDriver{}
			case "StorageClass":
				obj = &storagev1.StorageClass{}
			default:
				obj = &map[string]any{} // RBAC, ServiceMonitor, PodMonitor: parsed loosely
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: %s %s: %v\n%s", name, head.Kind, head.Metadata.Name, err, doc)
			}
			n := head.Metadata.Name
			switch o := obj.(type) {
			case *appsv1.StatefulSet:
				m.statefulSets[n] = o
			case *appsv1.Deployment:
				m.deployments[n] = o
			case *appsv1.DaemonSet:
				m.daemonSets[n] = o
			case *corev1.Service:
				m.services[n] = o
			case *corev1.Secret:
				m.secrets[n] = o
			case *storagev1.CSIDriver:
				m.csiDrivers[n] = o
			case *storagev1.StorageClass:
				m.classes[n] = o
			}
			if n == "" {
				t.Errorf("%s: a %s without a name", name, head.Kind)
			}
		}
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func mustRender(t *testing.T, valuesFile string) *manifests {
	t.Helper()
	files, err := render(t, valuesFile, nil)
	if err != nil {
		t.Fatalf("render %q: %v", valuesFile, err)
	}
	return parse(t, files)
}

// flag returns the value of --name=value in args, and whether it is there.
func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "true", true
		}
	}
	return "", false
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in %v", name, spec.Containers)
	return corev1.Container{}
}

// workload is a pod template with the selector that owns it.
type workload struct {
	kind, name string
	selector   map[string]string
	template   corev1.PodTemplateSpec
}

func (m *manifests) workloads() []workload {
	var w []workload
	for n, s := range m.statefulSets {
		w = append(w, workload{"StatefulSet", n, s.Spec.Selector.MatchLabels, s.Spec.Template})
	}
	for n, d := range m.deployments {
		w = append(w, workload{"Deployment", n, d.Spec.Selector.MatchLabels, d.Spec.Template})
	}
	for n, d := range m.daemonSets {
		w = append(w, workload{"DaemonSet", n, d.Spec.Selector.MatchLabels, d.Spec.Template})
	}
	sort.Slice(w, func(i, j int) bool { return w[i].name < w[j].name })
	return w
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkMasters: the peers list has one entry per replica, each the stable
// DNS name of a master pod, and each master's --ip (with $(POD_NAME)
// expanded) is its own entry; every client of the masters lists the same.
func checkMasters(t *testing.T, m *manifests, replicas int) {
	name := release + "-master"
	sts := m.statefulSets[name]
	if sts == nil {
		t.Fatalf("no StatefulSet %s", name)
	}
	if int(*sts.Spec.Replicas) != replicas {
		t.Errorf("masters: %d replicas, want %d", *sts.Spec.Replicas, replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("masters: pod management %q: the Raft group needs its members started together", sts.Spec.PodManagementPolicy)
	}
	svc := m.services[sts.Spec.ServiceName]
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Fatalf("masters: serviceName %q is not a headless Service publishing not-ready addresses: %+v", sts.Spec.ServiceName, svc)
	}
	c := container(t, sts.Spec.Template.Spec, "master")
	peers, ok := flag(c.Args, "peers")
	if !ok {
		t.Fatalf("masters: no --peers in %v", c.Args)
	}
	list := strings.Split(peers, ",")
	if len(list) != replicas {
		t.Fatalf("masters: %d peers for %d replicas: %s", len(list), replicas, peers)
	}
	port, _ := flag(c.Args, "port")
	ip, _ := flag(c.Args, "ip")
	podNameFromEnv := false
	for _, e := range c.Env {
		if e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			podNameFromEnv = true
		}
	}
	if !podNameFromEnv {
		t.Errorf("masters: POD_NAME does not come from metadata.name: %+v", c.Env)
	}
	for i, p := range list {
		pod := fmt.Sprintf("%s-%d", sts.Name, i)
		want := fmt.Sprintf("%s.%s.%s.svc.cluster.local:%s", pod, svc.Name, namespace, port)
		if p != want {
			t.Errorf("masters: peer %d is %q, want %q", i, p, want)
		}
		if self := strings.ReplaceAll(ip, "$(POD_NAME)", pod) + ":" + port; self != p {
			t.Errorf("masters: pod %s advertises %s, not its peers entry %s", pod, self, p)
		}
	}
	for _, s := range sts.Spec.Template.Spec.Containers[0].Ports {
		if s.Name == "raft" && fmt.Sprint(s.ContainerPort) != fmt.Sprint(atoi(port)+20000) {
			t.Errorf("masters: raft port %d, want HTTP port + 20000", s.ContainerPort)
		}
	}
	// Every process that dials the masters lists the same addresses.
	for _, w := range m.workloads() {
		for _, c := range w.template.Spec.Containers {
			if v, ok := flag(c.Args, "master"); ok && v != peers {
				t.Errorf("%s %s: --master=%s, want the peers %s", w.kind, w.name, v, peers)
			}
		}
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// checkSelectors: a workload's selector selects its own pods and no other
// workload's; every Service selects the pods of some workload and targets
// ports those pods name.
func checkSelectors(t *testing.T, m *manifests) {
	ws := m.workloads()
	for _, w := range ws {
		if !matches(w.selector, w.template.Labels) {
			t.Errorf("%s %s: selector %v does not select its pods %v", w.kind, w.name, w.selector, w.template.Labels)
		}
		for _, o := range ws {
			if o.name != w.name && matches(w.selector, o.template.Labels) {
				t.Errorf("%s %s: selector %v also selects the pods of %s %s", w.kind, w.name, w.selector, o.kind, o.name)
			}
		}
	}
	for n, svc := range m.services {
		var sel []workload
		for _, w := range ws {
			if matches(svc.Spec.Selector, w.template.Labels) {
				sel = append(sel, w)
			}
		}
		if len(sel) == 0 {
			t.Errorf("Service %s: selector %v selects no pods", n, svc.Spec.Selector)
			continue
		}
		for _, p := range svc.Spec.Ports {
			for _, w := range sel {
				if !podHasPort(w.template.Spec, p.TargetPort.String()) {
					t.Errorf("Service %s: port %s targets %q, which the pods of %s do not have", n, p.Name, p.TargetPort.String(), w.name)
				}
			}
		}
	}
	for n, s := range m.statefulSets {
		if m.services[s.Spec.ServiceName] == nil || m.services[s.Spec.ServiceName].Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("StatefulSet %s: serviceName %q is not a headless Service of the chart", n, s.Spec.ServiceName)
		}
	}
}

func podHasPort(spec corev1.PodSpec, port string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
				return true
			}
		}
	}
	return false
}

// checkKelpContainers: every container of the Kelp image is probed on
// /healthz of a port of its pod, asks for resources and serves metrics;
// servers (not the CSI plugins) also have a readiness probe.
func checkKelpContainers(t *testing.T, m *manifests, image string) {
	n := 0
	for _, w := range m.workloads() {
		for _, c := range w.template.Spec.Containers {
			if c.Image != image {
				continue
			}
			n++
			where := w.kind + " " + w.name + "/" + c.Name
			probes := map[string]*corev1.Probe{"liveness": c.LivenessProbe}
			if len(c.Args) == 0 || c.Args[0] != "csi" {
				probes["readiness"] = c.ReadinessProbe
			}
			for kind, p := range probes {
				if p == nil || p.HTTPGet == nil {
					t.Errorf("%s: no HTTP %s probe", where, kind)
					continue
				}
				if p.HTTPGet.Path != "/healthz" {
					t.Errorf("%s: %s probe on %q, want /healthz", where, kind, p.HTTPGet.Path)
				}
				if !podHasPort(w.template.Spec, p.HTTPGet.Port.String()) {
					t.Errorf("%s: %s probe port %q is no port of the pod", where, kind, p.HTTPGet.Port.String())
				}
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s: no cpu and memory requests: %v", where, c.Resources.Requests)
			}
			if v, ok := flag(c.Args, "metrics.port"); !ok || v != "9324" {
				t.Errorf("%s: --metrics.port=%q, want 9324", where, v)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no container runs %s", image)
	}
}

// mountFor returns the volume a path inside container c is on, and the
// path relative to that mount.
func mountFor(c corev1.Container, p string) (string, string, bool) {
	best, rel := "", ""
	bestLen := -1
	for _, vm := range c.VolumeMounts {
		mp := strings.TrimSuffix(vm.MountPath, "/")
		if (p == mp || strings.HasPrefix(p, mp+"/")) && len(mp) > bestLen {
			best, rel, bestLen = vm.Name, strings.TrimPrefix(p, mp), len(mp)
		}
	}
	return best, rel, bestLen >= 0
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// socketOf returns where a container's CSI socket is: its volume and the
// path on that volume.
func socketOf(t *testing.T, c corev1.Container, flagName string) (string, string) {
	t.Helper()
	v, ok := flag(c.Args, flagName)
	if !ok {
		t.Fatalf("%s: no --%s in %v", c.Name, flagName, c.Args)
	}
	p := strings.TrimPrefix(v, "unix://")
	vol, rel, ok := mountFor(c, p)
	if !ok {
		t.Fatalf("%s: socket %s is on no volume mount", c.Name, p)
	}
	return vol, rel
}

// checkCSI: the node plugin, its registrar and the kubelet agree on the
// socket; the controller and its sidecars share theirs; the node plugin can
// mount FUSE file systems the kubelet sees; the StorageClass names the driver.
func checkCSI(t *testing.T, m *manifests, kubeletDir string) {
	if len(m.csiDrivers) != 1 {
		t.Fatalf("%d CSIDriver objects, want 1", len(m.csiDrivers))
	}
	var driver *storagev1.CSIDriver
	for _, d := range m.csiDrivers {
		driver = d
	}
	if driver.Spec.AttachRequired == nil || *driver.Spec.AttachRequired {
		t.Errorf("CSIDriver: attachRequired must be false (no ControllerPublish)")
	}
	if len(m.classes) != 1 {
		t.Fatalf("%d StorageClasses, want 1", len(m.classes))
	}
	for n, sc := range m.classes {
		if sc.Provisioner != driver.Name {
			t.Errorf("StorageClass %s: provisioner %q, CSIDriver %q", n, sc.Provisioner, driver.Name)
		}
	}

	ds := m.daemonSets[release+"-csi-node"]
	if ds == nil {
		t.Fatalf("no DaemonSet %s-csi-node", release)
	}
	spec := ds.Spec.Template.Spec
	plugin := container(t, spec, "kelp-csi")
	if v, _ := flag(plugin.Args, "node"); v != "true" || plugin.Args[0] != "csi" {
		t.Errorf("node plugin args %v: want csi ... --node", plugin.Args)
	}
	if _, ok := flag(plugin.Args, "controller"); ok {
		t.Errorf("node plugin runs --controller too")
	}
	if id, _ := flag(plugin.Args, "node-id"); id != "$(NODE_NAME)" {
		t.Errorf("node plugin --node-id=%q, want $(NODE_NAME)", id)
	}
	// The state files survive the plugin: they are on the host.
	if sd, _ := flag(plugin.Args, "state-dir"); true {
		svol, srel, ok := mountFor(plugin, sd)
		if hv := volume(spec, svol); !ok || hv == nil || hv.HostPath == nil || path.Join(hv.HostPath.Path, srel) != "/var/lib/kelp-csi" {
			t.Errorf("node plugin: --state-dir=%q is not the host's /var/lib/kelp-csi", sd)
		}
	}
	if sc := plugin.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Errorf("node plugin is not privileged")
	}
	vol, rel := socketOf(t, plugin, "endpoint")
	v := volume(spec, vol)
	if v == nil || v.HostPath == nil {
		t.Fatalf("node plugin socket volume %q is not a hostPath", vol)
	}
	hostSocket := path.Join(v.HostPath.Path, rel)
	if want := path.Join(kubeletDir, "plugins", driver.Name, "csi.sock"); hostSocket != want {
		t.Errorf("node plugin socket on the host is %s, want %s", hostSocket, want)
	}
	reg := container(t, spec, "node-driver-registrar")
	if rvol, rrel := socketOf(t, reg, "csi-address"); rvol != vol || rrel != rel {
		t.Errorf("registrar dials %s:%s, the plugin listens on %s:%s", rvol, rrel, vol, rel)
	}
	if p, _ := flag(reg.Args, "kubelet-registration-path"); p != hostSocket {
		t.Errorf("registrar tells the kubelet %q, the socket is at %s on the host", p, hostSocket)
	}
	regVol, _, ok := mountFor(reg, "/registration")
	if rv := volume(spec, regVol); !ok || rv == nil || rv.HostPath == nil || rv.HostPath.Path != path.Join(kubeletDir, "plugins_registry") {
		t.Errorf("registrar's /registration is not the kubelet's plugins_registry")
	}
	if lp := container(t, spec, "liveness-probe"); true {
		if lvol, lrel := socketOf(t, lp, "csi-address"); lvol != vol || lrel != rel {
			t.Errorf("liveness probe dials %s:%s, the plugin listens on %s:%s", lvol, lrel, vol, rel)
		}
	}
	// Mounts made for pods reach the kubelet and the pods.
	for _, dir := range []string{path.Join(kubeletDir, "pods"), path.Join(kubeletDir, "plugins")} {
		found := false
		for _, vm := range plugin.VolumeMounts {
			if vm.MountPath == dir {
				found = true
				hv := volume(spec, vm.Name)
				if vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional {
					t.Errorf("node plugin: %s without Bidirectional mount propagation", dir)
				}
				if hv == nil || hv.HostPath == nil || hv.HostPath.Path != dir {
					t.Errorf("node plugin: %s is not the host's %s", dir, dir)
				}
			}
		}
		if !found {
			t.Errorf("node plugin: kubelet directory %s not mounted", dir)
		}
	}
	fuse := false
	for _, vm := range plugin.VolumeMounts {
		if hv := volume(spec, vm.Name); vm.MountPath == "/dev/fuse" && hv != nil && hv.HostPath != nil && hv.HostPath.Path == "/dev/fuse" {
			fuse = true
		}
	}
	if !fuse {
		t.Errorf("node plugin: no /dev/fuse from the host")
	}

	dep := m.deployments[release+"-csi-controller"]
	if dep == nil {
		t.Fatalf("no Deployment %s-csi-controller", release)
	}
	cspec := dep.Spec.Template.Spec
	ctl := container(t, cspec, "kelp-csi")
	if v, _ := flag(ctl.Args, "controller"); v != "true" {
		t.Errorf("controller args %v: no --controller", ctl.Args)
	}
	cvol, crel := socketOf(t, ctl, "endpoint")
	for _, side := range []string{"csi-provisioner", "csi-resizer", "liveness-probe"} {
		if svol, srel := socketOf(t, container(t, cspec, side), "csi-address"); svol != cvol || srel != crel {
			t.Errorf("controller: %s dials %s:%s, the driver listens on %s:%s", side, svol, srel, cvol, crel)
		}
	}
	if cspec.ServiceAccountName == "" {
		t.Errorf("controller: no service account for the sidecars' API calls")
	}
	filer := release + "-filer." + namespace + ".svc.cluster.local:8888"
	for _, c := range []corev1.Container{plugin, ctl} {
		if f, _ := flag(c.Args, "filer"); f != filer {
			t.Errorf("%s: --filer=%q, want %q", c.Name, f, filer)
		}
	}
}

// volumeGroup is what one volume StatefulSet must be.
type volumeGroup struct{ dc, rack, zone, rackValue string }

func checkVolumes(t *testing.T, m *manifests, want []volumeGroup, replicas int) {
	var got []string
	for n, s := range m.statefulSets {
		c := s.Spec.Template.Spec.Containers[0]
		if c.Args[0] != "volume" {
			continue
		}
		got = append(got, n)
		dc, _ := flag(c.Args, "data-center")
		rack, _ := flag(c.Args, "rack")
		i := slices.IndexFunc(want, func(g volumeGroup) bool { return g.dc == dc && g.rack == rack })
		if i < 0 {
			t.Errorf("StatefulSet %s: --data-center=%s --rack=%s is none of %v", n, dc, rack, want)
			continue
		}
		g := want[i]
		if wantName := fmt.Sprintf("%s-volume-%s-%s", release, g.dc, g.rack); n != wantName {
			t.Errorf("StatefulSet %s for %s/%s, want the name %s", n, dc, rack, wantName)
		}
		if int(*s.Spec.Replicas) != replicas {
			t.Errorf("StatefulSet %s: %d replicas, want %d", n, *s.Spec.Replicas, replicas)
		}
		// The pods run only on nodes whose labels say this data center and rack.
		req := map[string][]string{}
		if a := s.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 {
				t.Errorf("StatefulSet %s: %d node selector terms (ORed), want 1", n, len(terms))
			}
			for _, term := range terms {
				for _, e := range term.MatchExpressions {
					if e.Operator != corev1.NodeSelectorOpIn {
						t.Errorf("StatefulSet %s: node affinity operator %s", n, e.Operator)
					}
					req[e.Key] = e.Values
				}
			}
		}
		check := func(key, value string) {
			if value == "" {
				if _, ok := req[key]; ok {
					t.Errorf("StatefulSet %s: pinned on %s though its group names no value", n, key)
				}
				return
			}
			if !slices.Equal(req[key], []string{value}) {
				t.Errorf("StatefulSet %s: node affinity on %s is %v, want [%s]", n, key, req[key], value)
			}
		}
		check("topology.kubernetes.io/zone", g.zone)
		check("kelp.io/rack", g.rackValue)
		ip, _ := flag(c.Args, "ip")
		if want := "$(POD_NAME)." + s.Spec.ServiceName + "." + namespace + ".svc.cluster.local"; ip != want {
			t.Errorf("StatefulSet %s: --ip=%s, want the stable name %s", n, ip, want)
		}
		if s.Spec.Template.Labels["kelp.io/data-center"] != dc || s.Spec.Template.Labels["kelp.io/rack"] != rack {
			t.Errorf("StatefulSet %s: pod labels %v do not name %s/%s", n, s.Spec.Template.Labels, dc, rack)
		}
	}
	if len(got) != len(want) {
		t.Errorf("volume StatefulSets %v, want %d: %v", got, len(want), want)
	}
}

func lintChart(t *testing.T, valuesFile string) {
	t.Helper()
	vals := map[string]any{}
	if valuesFile != "" {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, valuesFile))
		if err != nil {
			t.Fatal(err)
		}
		vals = v
	}
	l := lint.AllWithKubeVersion(chartDir, vals, namespace, nil)
	for _, msg := range l.Messages {
		t.Logf("lint %q: %s", valuesFile, msg)
		if msg.Severity >= support.WarningSev {
			t.Errorf("lint %q: %s", valuesFile, msg)
		}
	}
}

func TestChartDefaults(t *testing.T) {
	m := mustRender(t, "")
	checkMasters(t, m, 3)
	checkSelectors(t, m)
	checkKelpContainers(t, m, "kelp:latest")
	checkCSI(t, m, "/var/lib/kubelet")
	checkVolumes(t, m, []volumeGroup{{dc: "dc1", rack: "r1"}}, 3)
	filer := m.statefulSets[release+"-filer"]
	if filer == nil {
		t.Fatal("no filer StatefulSet")
	}
	c := filer.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "s3" {
		t.Errorf("filer runs %v: want `kelp s3` (filer and S3 in one process, one namespace)", c.Args)
	}
	if s, _ := flag(c.Args, "filer.store"); s != "embedded" {
		t.Errorf("filer store %q, want embedded", s)
	}
	if m.services[release+"-s3"] == nil {
		t.Errorf("no S3 Service")
	}
	for _, k := range []string{"ServiceMonitor", "PodMonitor"} {
		if m.kinds[k] != 0 {
			t.Errorf("a %s by default: the CRD may not exist", k)
		}
	}
	if len(m.deployments) != 1 {
		t.Errorf("deployments %v: want only the CSI controller (WebDAV is off by default)", m.deployments)
	}
	lintChart(t, "")
}

func TestChartTwoDataCenters(t *testing.T) {
	m := mustRender(t, "ci/two-dc-values.yaml")
	checkMasters(t, m, 5)
	checkSelectors(t, m)
	checkKelpContainers(t, m, "kelp:latest")
	checkCSI(t, m, "/var/lib/kubelet")
	checkVolumes(t, m, []volumeGroup{
		{"dc1", "r1", "zone-a", "rack-1"}, {"dc1", "r2", "zone-a", "rack-2"},
		{"dc2", "r1", "zone-b", "rack-1"}, {"dc2", "r2", "zone-b", "rack-2"},
	}, 2)
	master := container(t, m.statefulSets[release+"-master"].Spec.Template.Spec, "master")
	if r, _ := flag(master.Args, "default-replication"); r != "100" {
		t.Errorf("masters: --default-replication=%s, want 100", r)
	}
	if u, _ := flag(master.Args, "admin.user"); u != "admin" {
		t.Errorf("masters: --admin.user=%q", u)
	}
	if p, ok := flag(master.Args, "admin.password"); ok {
		t.Errorf("masters: --admin.password=%q: the password must come from the Secret (env KELP_ADMIN_PASSWORD), not the args", p)
	}
	if i := slices.IndexFunc(master.Env, func(e corev1.EnvVar) bool { return e.Name == "KELP_ADMIN_PASSWORD" }); i < 0 ||
		master.Env[i].ValueFrom == nil || master.Env[i].ValueFrom.SecretKeyRef == nil || master.Env[i].ValueFrom.SecretKeyRef.Name != release+"-admin" {
		t.Errorf("masters: KELP_ADMIN_PASSWORD not from the Secret %s-admin: %+v", release, master.Env)
	}
	if s := m.secrets[release+"-admin"]; s == nil || s.StringData["password"] != "change-me" {
		t.Errorf("no admin Secret with the password")
	}
	filer := m.statefulSets[release+"-filer"]
	c := filer.Spec.Template.Spec.Containers[0]
	if *filer.Spec.Replicas != 2 {
		t.Errorf("filer replicas %d, want 2", *filer.Spec.Replicas)
	}
	if s, _ := flag(c.Args, "filer.store"); s != "postgres" {
		t.Errorf("filer store %q, want postgres", s)
	}
	if d, _ := flag(c.Args, "filer.store.dsn"); d != "$(KELP_STORE_DSN)" {
		t.Errorf("filer --filer.store.dsn=%q: the DSN (a password) must come from the Secret", d)
	}
	if s := m.secrets[release+"-filer-store"]; s == nil || !strings.HasPrefix(s.StringData["dsn"], "postgres://") {
		t.Errorf("no filer store Secret")
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
	}
	for _, k := range []string{"KELP_STORE_DSN", "KELP_ACCESS_KEY", "KELP_SECRET_KEY"} {
		if !env[k] {
			t.Errorf("filer: %s not from a Secret: %v", k, c.Env)
		}
	}
	wd := m.deployments[release+"-webdav"]
	if wd == nil {
		t.Fatal("no WebDAV Deployment")
	}
	if f, _ := flag(wd.Spec.Template.Spec.Containers[0].Args, "filer"); f != release+"-filer."+namespace+".svc.cluster.local:8888" {
		t.Errorf("webdav --filer=%s", f)
	}
	if m.kinds["ServiceMonitor"] != 1 || m.kinds["PodMonitor"] != 1 {
		t.Errorf("ServiceMonitor/PodMonitor: %v", m.kinds)
	}
	for _, sc := range m.classes {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			t.Errorf("StorageClass %s is not the default", sc.Name)
		}
	}
	lintChart(t, "ci/two-dc-values.yaml")
}

// A filer without the S3 gateway runs `kelp filer` with unprefixed store flags.
func TestChartFilerWithoutS3(t *testing.T) {
	files, err := render(t, "", map[string]any{"s3": map[string]any{"enabled": false},
		"filer": map[string]any{"store": "redis", "storeDSNSecret": "my-redis", "replicas": 3}})
	if err != nil {
		t.Fatal(err)
	}
	m := parse(t, files)
	c := m.statefulSets[release+"-filer"].Spec.Template.Spec.Containers[0]
	if c.Args[0] != "filer" {
		t.Fatalf("filer args %v", c.Args)
	}
	if s, _ := flag(c.Args, "store"); s != "redis" {
		t.Errorf("--store=%q", s)
	}
	if d, _ := flag(c.Args, "store.dsn"); d != "$(KELP_STORE_DSN)" {
		t.Errorf("--store.dsn=%q", d)
	}
	for _, e := range c.Env {
		if e.Name == "KELP_STORE_DSN" && e.ValueFrom.SecretKeyRef.Name != "my-redis" {
			t.Errorf("DSN from Secret %q, want my-redis", e.ValueFrom.SecretKeyRef.Name)
		}
	}
	if m.services[release+"-s3"] != nil || m.secrets[release+"-filer-store"] != nil {
		t.Errorf("an S3 Service or a chart store Secret though neither is asked for")
	}
	checkSelectors(t, m)
}

// Values that cannot make a working cluster fail the install with a message.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides map[string]any
		want      string
	}{
		{"even masters", map[string]any{"master": map[string]any{"replicas": 2}}, "odd number"},
		{"no masters", map[string]any{"master": map[string]any{"replicas": 0}}, "odd number"},
		{"embedded store shared", map[string]any{"filer": map[string]any{"replicas": 2}}, "postgres or redis"},
		{"unknown store", map[string]any{"filer": map[string]any{"store": "mysql"}}, "embedded, postgres, redis"},
		{"postgres without DSN", map[string]any{"filer": map[string]any{"store": "postgres"}}, "storeDSN"},
		{"data center name", map[string]any{"volume": map[string]any{"dataCenters": []any{
			map[string]any{"name": "DC_1", "racks": []any{map[string]any{"name": "r1", "replicas": 1}}}}}}, "lower case"},
		{"S3 keys per filer", map[string]any{"filer": map[string]any{"replicas": 2, "store": "redis", "storeDSN": "redis://r:6379/0"}}, "key pair of its own"},
		{"access key alone", map[string]any{"s3": map[string]any{"accessKey": "AK"}}, "secretKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, "", tc.overrides)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// A non-default kubelet directory moves every CSI host path with it.
func TestChartKubeletDir(t *testing.T) {
	files, err := render(t, "", map[string]any{"csi": map[string]any{"kubeletDir": "/var/snap/microk8s/common/var/lib/kubelet"}})
	if err != nil {
		t.Fatal(err)
	}
	checkCSI(t, parse(t, files), "/var/snap/microk8s/common/var/lib/kubelet")
}

// Every key of values.yaml is described in the chart's README (by its
// dotted path, or as `.key` in a row of its siblings).
func TestChartValuesDocumented(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(readme)
	var walk func(prefix string, v map[string]any)
	walk = func(prefix string, v map[string]any) {
		for k, sub := range v {
			p := prefix + k
			if m, ok := sub.(map[string]any); ok && len(m) > 0 && k != "resources" {
				walk(p+".", m)
				continue
			}
			// A leaf (resources counts as one): its path, its path with one
			// level as *, .key after a sibling's path, or a list's p[].field.
			parts := strings.Split(p, ".")
			found := strings.Contains(doc, "`"+p+"`") || strings.Contains(doc, "`."+k+"`") || strings.Contains(doc, "`"+p+"[].")
			for i := range parts {
				w := slices.Clone(parts)
				w[i] = "*"
				found = found || strings.Contains(doc, "`"+strings.Join(w, ".")+"`")
			}
			if !found {
				t.Errorf("values.yaml: %s is not in README.md", p)
			}
		}
	}
	walk("", vals)
}

// With tls.secret every Kelp process gets the certificate, key and CA from
// that Secret, and its probes speak HTTPS.
func TestChartTLS(t *testing.T) {
	files, err := render(t, "ci/two-dc-values.yaml", map[string]any{"tls": map[string]any{"secret": "kelp-certs"}})
	if err != nil {
		t.Fatal(err)
	}
	m := parse(t, files)
	checkSelectors(t, m)
	n := 0
	for _, w := range m.workloads() {
		for _, c := range w.template.Spec.Containers {
			if c.Image != "kelp:latest" {
				continue
			}
			n++
			where := w.name + "/" + c.Name
			for f, file := range map[string]string{"tls.cert": "tls.crt", "tls.key": "tls.key", "tls.ca": "ca.crt"} {
				v, _ := flag(c.Args, f)
				vol, rel, ok := mountFor(c, v)
				sv := volume(w.template.Spec, vol)
				if !ok || sv == nil || sv.Secret == nil || sv.Secret.SecretName != "kelp-certs" || rel != "/"+file {
					t.Errorf("%s: --%s=%q is not %s of the Secret kelp-certs", where, f, v, file)
				}
			}
			if c.Args[0] != "csi" {
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
						t.Errorf("%s: probe scheme %q with TLS on", where, p.HTTPGet.Scheme)
					}
				}
			}
		}
	}
	if n != 9 { // masters, 4 volume groups, filer, webdav, 2 CSI
		t.Errorf("%d Kelp containers, want 9", n)
	}
	// Without TLS the probes are plain HTTP.
	for _, s := range mustRender(t, "").statefulSets {
		if p := s.Spec.Template.Spec.Containers[0].ReadinessProbe; p.HTTPGet.Scheme != corev1.URISchemeHTTP {
			t.Errorf("%s: probe scheme %q without TLS", s.Name, p.HTTPGet.Scheme)
		}
	}
}
