package main

import (
	"os"
	ossignal "os/signal"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

func notifySignals(c chan os.Signal, sigs ...os.Signal) { ossignal.Notify(c, sigs...) }
func stopSignals(c chan os.Signal)                      { ossignal.Stop(c) }
func runtimeScheme() *runtime.Scheme                    { return scheme.Scheme }
func typesUID(s string) types.UID                       { return types.UID(s) }
