package main

import (
	goflag "flag"

	flag "github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

func metav1ObjectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// addKlogFlags adds --v and --vmodule; klog's other flags are not needed.
func addKlogFlags(fs *flag.FlagSet) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		f := flag.PFlagFromGoFlag(klogFlags.Lookup(name))
		if name == "v" {
			f.Usage = "log verbosity: 2 logs every decision, 4 every event."
		}
		fs.AddFlag(f)
	}
}
