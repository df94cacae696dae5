package confighash

// Digested is a metav1.Object through its slimcache.Identity; of the rest of the metadata it
// keeps the labels and the kept annotations, behind meta.

func (d *Digested) GetLabels() map[string]string {
	if d.meta == nil {
		return nil
	}
	return d.meta.labels
}

func (d *Digested) SetLabels(v map[string]string) {
	if d.meta == nil {
		d.meta = &digestedMeta{}
	}
	d.meta.labels = v
}

func (d *Digested) GetAnnotations() map[string]string {
	if d.meta == nil {
		return nil
	}
	return d.meta.annotations
}

func (d *Digested) SetAnnotations(v map[string]string) {
	if d.meta == nil {
		d.meta = &digestedMeta{}
	}
	d.meta.annotations = v
}
