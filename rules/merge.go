package rules

import "github.com/bondd/bondd/classify"

// merger carries the state of one Evaluate's merge that the Directive does
// not show.
type merger struct {
	single bool                   // some matching rule asked for single_path
	keys   [MaxPreferences]uint16 // interned keys of d.Preferences
}

// merge folds the actions of rule r, which matched, into d. Rules arrive in
// evaluation order (priority descending), so "first" below means "of the
// highest-priority matching rule". Per dimension (MoMQ §3, "When multiple
// rules match an Object, their actions merge per dimension"):
//
//   - priority: the maximum;
//   - balancing: single_path if any matching rule asks for it, else
//     multi_path if one asks for that;
//   - prefer: a union ordered by rule priority; on the same label key the
//     first rule wins ("a specific rule overrides a catch-all default");
//     beyond MaxPreferences, later preferences are dropped;
//   - affinity: the first rule whose affinity key is present in the packet
//     with an integer value;
//   - fec, duplicate, deadline_ms, resequence_ms (bondd's own): the first
//     rule that sets them, so a specific rule can override a catch-all's
//     setting in either direction (fec off, duplicate 1).
func (m *merger) merge(d *Directive, r *rule, md *classify.Metadata) {
	f := r.fields
	if f == 0 {
		return
	}
	if f&FieldPriority != 0 && (d.Fields&FieldPriority == 0 || r.priority > d.Priority) {
		d.Priority = r.priority
	}
	if f&FieldBalancing != 0 {
		if r.balancing == SinglePath {
			m.single = true
			d.Balancing = SinglePath
		} else if !m.single {
			d.Balancing = MultiPath
		}
	}
	if f&FieldPreferences != 0 {
		for i := 0; i < len(r.prefs) && d.NumPreferences < MaxPreferences; i++ {
			m.addPreference(d, &r.prefs[i])
		}
	}
	if f&FieldAffinity != 0 && d.Fields&FieldAffinity == 0 {
		if id, ok := md.Uint(r.affinity); ok {
			d.Affinity, d.AffinityID = r.affinity, id
			d.Fields |= FieldAffinity
		}
	}
	first := f &^ d.Fields // bondd's own: first rule wins
	if first&FieldFEC != 0 {
		d.FEC = r.fec
	}
	if first&FieldDuplicate != 0 {
		d.Duplicate = r.duplicate
	}
	if first&FieldDeadline != 0 {
		d.Deadline = r.deadline
	}
	if first&FieldResequence != 0 {
		d.Resequence = r.resequence
	}
	d.Fields |= f &^ FieldAffinity &^ FieldPreferences
}

// addPreference appends p unless its label key is already preferred. The
// caller checks that d.Preferences has room.
func (m *merger) addPreference(d *Directive, p *pref) {
	n := int(d.NumPreferences)
	for i := 0; i < n; i++ {
		if m.keys[i] == p.id {
			return
		}
	}
	m.keys[n] = p.id
	d.Preferences[n] = p.Preference
	d.NumPreferences++
	d.Fields |= FieldPreferences
}
