package agentapi

import (
	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// The content types of the Agent API (ContentType), which are also the
// canonical part kinds.
var contentTypes = keySet{"text", "data", "image", "audio", "file", "refusal", "video"}

const contentTypeList = "text, data, image, audio, file, refusal, video"

// content holds the fields of one content object as read from the wire.
type content struct {
	status   string
	typ      string
	msgID    string
	index    int
	hasIndex bool
	delta    bool
	// The type-specific fields; which of them count depends on typ.
	text, imageURL, data, format, videoURL gjson.Result
	fileURL, fileID, filename, fileData    gjson.Result
	refusal                                gjson.Result
	ext                                    extBuilder
}

// readContent reads a content object. With keepExt it collects the members
// the model does not name into c.ext; request content drops them, as the
// Python server's pydantic models do.
func readContent(obj gjson.Result, c *content, keepExt bool) {
	obj.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "sequence_number", "object":
		case "status":
			c.status = v.Str
		case "type":
			c.typ = v.Str
		case "index":
			if v.Type == gjson.Number {
				c.index, c.hasIndex = int(v.Int()), true
			}
		case "delta":
			c.delta = v.Type == gjson.True
		case "msg_id":
			c.msgID = v.Str
		case "text":
			c.text = v
		case "image_url":
			c.imageURL = v
		case "data":
			c.data = v
		case "format":
			c.format = v
		case "video_url":
			c.videoURL = v
		case "file_url":
			c.fileURL = v
		case "file_id":
			c.fileID = v
		case "filename":
			c.filename = v
		case "file_data":
			c.fileData = v
		case "refusal":
			c.refusal = v
		case "error":
			if keepExt && v.Type != gjson.Null {
				c.ext.add(k, v)
			}
		default:
			if keepExt {
				c.ext.add(k, v)
			}
		}
		return true
	})
	if c.typ == "" && c.text.Exists() {
		// The docs' examples leave out the type of text content.
		c.typ = "text"
	}
}

// part returns the content as a Part; ok is false for an unknown type.
func (c *content) part() (p translate.Part, ok bool) {
	switch c.typ {
	case "text":
		return translate.Part{Kind: translate.PartText, Text: c.text.Str}, true
	case "image":
		return translate.Part{Kind: translate.PartImage, URI: c.imageURL.Str}, true
	case "video":
		return translate.Part{Kind: translate.PartVideo, URI: c.videoURL.Str}, true
	case "refusal":
		return translate.Part{Kind: translate.PartRefusal, Text: c.refusal.Str}, true
	case "data":
		p = translate.Part{Kind: translate.PartData}
		if c.data.Exists() && c.data.Type != gjson.Null {
			p.Data = compactString(c.data.Raw)
		}
		return p, true
	case "audio":
		return translate.Part{Kind: translate.PartAudio, Bytes: c.data.Str, Format: c.format.Str}, true
	case "file":
		return translate.Part{
			Kind:   translate.PartFile,
			URI:    c.fileURL.Str,
			FileID: c.fileID.Str,
			Name:   c.filename.Str,
			Bytes:  c.fileData.Str,
		}, true
	}
	return p, false
}

// contentType returns the Agent API content type for a part. A part of a
// kind the Agent API lacks is sent as the nearest type by what it holds.
func contentType(p *translate.Part) string {
	switch p.Kind {
	case translate.PartText, translate.PartImage, translate.PartFile, translate.PartData,
		translate.PartAudio, translate.PartRefusal, translate.PartVideo:
		return string(p.Kind)
	}
	switch {
	case len(p.Data) > 0:
		return "data"
	case p.URI != "" || p.Bytes != "" || p.FileID != "":
		return "file"
	}
	return "text"
}

// appendPartFields appends the type-specific members of a content object
// (after a comma), every one present as the Python server writes them, with
// null for what is unset. A text's text is never null.
func appendPartFields(dst []byte, typ string, p *translate.Part) []byte {
	switch typ {
	case "text":
		dst = append(dst, `,"text":`...)
		dst = jsonw.AppendString(dst, p.Text)
	case "image":
		dst = append(dst, `,"image_url":`...)
		dst = appendURI(dst, p)
	case "video":
		dst = append(dst, `,"video_url":`...)
		dst = appendURI(dst, p)
	case "refusal":
		dst = append(dst, `,"refusal":`...)
		dst = jsonw.AppendString(dst, p.Text)
	case "data":
		dst = append(dst, `,"data":`...)
		dst = appendRaw(dst, p.Data)
	case "audio":
		dst = append(dst, `,"data":`...)
		if p.Bytes != "" {
			dst = jsonw.AppendString(dst, p.Bytes)
		} else {
			dst = appendStringOrNull(dst, p.URI)
		}
		dst = append(dst, `,"format":`...)
		dst = appendStringOrNull(dst, p.Format)
	case "file":
		dst = append(dst, `,"file_url":`...)
		dst = appendStringOrNull(dst, p.URI)
		dst = append(dst, `,"file_id":`...)
		dst = appendStringOrNull(dst, p.FileID)
		dst = append(dst, `,"filename":`...)
		dst = appendStringOrNull(dst, p.Name)
		dst = append(dst, `,"file_data":`...)
		dst = appendStringOrNull(dst, p.Bytes)
	}
	return dst
}

// appendURI writes an image or video location; inline bytes without a URI
// become a data: URI, which image_url accepts.
func appendURI(dst []byte, p *translate.Part) []byte {
	if p.URI != "" || p.Bytes == "" {
		return appendStringOrNull(dst, p.URI)
	}
	mime := p.MIME
	if mime == "" {
		mime = "application/octet-stream"
	}
	return jsonw.AppendString(dst, "data:"+mime+";base64,"+p.Bytes)
}

// partFieldKeys lists the type-specific keys written for each content type,
// so that a carried-over Ext never repeats one.
func partFieldKeys(typ string) keySet {
	switch typ {
	case "text":
		return keySet{"text"}
	case "image":
		return keySet{"image_url"}
	case "video":
		return keySet{"video_url"}
	case "refusal":
		return keySet{"refusal"}
	case "data":
		return keySet{"data"}
	case "audio":
		return keySet{"data", "format"}
	case "file":
		return keySet{"file_url", "file_id", "filename", "file_data"}
	}
	return nil
}

// appendRequestContent appends a content object as a request carries it:
// only the members that are set, like the Python client's
// model_dump(exclude_none=True).
func appendRequestContent(dst []byte, p *translate.Part) []byte {
	typ := contentType(p)
	dst = append(dst, `{"type":`...)
	dst = jsonw.AppendString(dst, typ)
	str := func(key, v string) {
		if v != "" {
			dst = append(dst, ',')
			dst = jsonw.AppendString(dst, key)
			dst = append(dst, ':')
			dst = jsonw.AppendString(dst, v)
		}
	}
	switch typ {
	case "text":
		dst = append(dst, `,"text":`...)
		dst = jsonw.AppendString(dst, p.Text)
	case "refusal":
		dst = append(dst, `,"refusal":`...)
		dst = jsonw.AppendString(dst, p.Text)
	case "image", "video":
		if p.URI != "" || p.Bytes != "" {
			dst = append(dst, ',', '"')
			dst = append(dst, typ...)
			dst = append(dst, `_url":`...)
			dst = appendURI(dst, p)
		}
	case "data":
		if len(p.Data) > 0 {
			dst = append(dst, `,"data":`...)
			dst = appendRaw(dst, p.Data)
		}
	case "audio":
		if p.Bytes != "" {
			str("data", p.Bytes)
		} else {
			str("data", p.URI)
		}
		str("format", p.Format)
	case "file":
		str("file_url", p.URI)
		str("file_id", p.FileID)
		str("filename", p.Name)
		str("file_data", p.Bytes)
	}
	return append(dst, '}')
}
