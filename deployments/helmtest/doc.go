// Package helmtest holds the test of the Helm chart deployments/helm/causeway.
// It is a module of its own so that Helm's and Kubernetes' dependencies never
// reach the binaries' module; it knows the binaries only through the
// configuration reference they generate (deployments/config-reference.json)
// and through the proxy's own parser of the services file
// (pkg/servicelb/filesource, from the main module by its replace directive), which
// reads the services ConfigMaps the chart renders.
package helmtest
