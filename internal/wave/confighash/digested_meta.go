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

// Incomplete says why the object's content is not one a pod can start on (sourceready), or "".
func (d *Digested) Incomplete() string {
	if d.meta == nil {
		return ""
	}
	return d.meta.incomplete
}

// SetIncomplete keeps why the object's content is not complete ("": complete).
func (d *Digested) SetIncomplete(why string) {
	if why == "" {
		return
	}
	if d.meta == nil {
		d.meta = &digestedMeta{}
	}
	d.meta.incomplete = why
}
