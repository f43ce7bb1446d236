package computer

import (
	"context"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/desktop"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// maxWindowPages bounds the resources/list pages read per server for the
// desktop, so a misbehaving server cannot keep a request going forever.
const maxWindowPages = 100

// windows gathers the window:// resources of every connected server that
// declares resources, with their text contents, in each server's
// resources/list order.
func (c *Computer) windows(ctx context.Context) []desktop.Window {
	c.mu.RLock()
	var ups []*hosted
	for _, s := range c.order {
		if h := c.servers[s.BundleID]; h != nil && h.up != nil {
			ups = append(ups, h)
		}
	}
	c.mu.RUnlock()
	var out []desktop.Window
	for _, h := range ups {
		if caps := h.up.Capabilities(); caps == nil || caps.Resources == nil {
			continue
		}
		cursor := ""
		for page := 0; page < maxWindowPages; page++ {
			res, err := h.up.ListResources(ctx, cursor)
			if err != nil {
				c.log.Warn("desktop: resources/list failed", "bundle_id", h.cfg.BundleID, "err", err)
				break
			}
			for _, r := range res.Resources {
				if !desktop.IsWindowURI(r.URI) {
					continue
				}
				w := desktop.Window{URI: r.URI, Server: h.cfg.BundleID}
				if r.Annotations != nil {
					var warn bool
					if w.Priority, warn = desktop.NormalizePriority(r.Annotations.Priority); warn {
						c.log.Warn("desktop: priority out of range", "bundle_id", h.cfg.BundleID, "uri", r.URI)
					}
				}
				w.Fullscreen, _ = desktop.FullscreenFromMeta(r.Meta)
				if err := h.up.Subscribe(ctx, r.URI); err != nil {
					c.log.Debug("desktop: resources/subscribe failed", "bundle_id", h.cfg.BundleID, "uri", r.URI, "err", err)
				}
				if rr, err := h.up.ReadResource(ctx, r.URI); err == nil {
					for _, rc := range rr.Contents {
						if rc.Blob == nil {
							w.Texts = append(w.Texts, rc.Text)
						}
					}
				}
				out = append(out, w)
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
	}
	return out
}

// desktopRet answers client:get_desktop.
func (c *Computer) desktopRet(e *sio.Event, req smcp.GetDesktopReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := c.windows(ctx)
	var history []string
	for _, r := range c.History() {
		history = append(history, r.BundleID)
	}
	answer(e, smcp.GetDesktopRet{
		Desktops: desktop.Organize(ws, desktop.Options{Size: req.DesktopSize, Window: req.Window, History: history}),
		ReqID:    req.ReqID,
	})
}

// resourcesChanged tells the office that windows may have changed, and
// the skill registry that skill:// resources may have.
func (c *Computer) resourcesChanged(ch mcphost.ResourceChange) {
	c.emit(smcp.EventUpdateDesktop)
	c.skillResourcesChanged(ch)
}
