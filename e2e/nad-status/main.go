// nad-status reads a Pod (JSON) on stdin and prints what the Network Plumbing WG's own client
// library makes of its k8s.v1.cni.cncf.io/network-status annotation, as JSON; with -strict it also
// decodes the annotation refusing any field the standard's NetworkStatus does not have. It exits 1
// with the library's error. Built and run by e2e/kube.test.ts.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadutils "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/utils"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	strict := flag.Bool("strict", false, "refuse fields the standard does not have")
	flag.Parse()
	var pod corev1.Pod
	if err := json.NewDecoder(os.Stdin).Decode(&pod); err != nil {
		fmt.Fprintln(os.Stderr, "stdin is not a pod:", err)
		os.Exit(2)
	}
	statuses, err := nadutils.GetNetworkStatus(&pod)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *strict {
		decoder := json.NewDecoder(bytes.NewReader([]byte(pod.Annotations[nadv1.NetworkStatusAnnot])))
		decoder.DisallowUnknownFields()
		var exact []nadv1.NetworkStatus
		if err := decoder.Decode(&exact); err != nil {
			fmt.Fprintln(os.Stderr, "not the standard's fields:", err)
			os.Exit(1)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(statuses); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
