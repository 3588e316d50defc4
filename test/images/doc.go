// Package images holds the test of Causeway's runtime images: it builds them
// from the root Dockerfile with buildah (scripts/build-images.sh, as `make
// images` does) into a throw-away storage and inspects what a registry would
// get: the image configuration and the files of the layers.
package images
