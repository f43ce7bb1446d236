package computer

import (
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// startSkills starts the skill registry (called once by New, before any
// upstream starts). SKELETON.
func (c *Computer) startSkills() error { return nil }

// stopSkills stops what startSkills started (called by Close, and by New
// when it fails). SKELETON.
func (c *Computer) stopSkills() {}

// upstreamChanged is called when the upstream bundleID's tools or
// connection state change (mcphost.Options.OnChange). SKELETON.
func (c *Computer) upstreamChanged(bundleID string) {}

// skillResourcesChanged is called when an upstream reports that its
// resource list or one resource changed. SKELETON.
func (c *Computer) skillResourcesChanged(ch mcphost.ResourceChange) {}

// getSkills answers client:get_skills. SKELETON: no skills yet.
func (c *Computer) getSkills(e *sio.Event, req smcp.GetSkillsReq) {
	answer(e, smcp.GetSkillsRet{ReqID: req.ReqID})
}

// getSkill answers client:get_skill. SKELETON.
func (c *Computer) getSkill(e *sio.Event, req smcp.GetSkillReq) {
	answer(e, smcp.NewError(smcp.CodeMCPServerNotFound, "Skill not found"))
}
